// Steering from the page: a shell command posted to /api/steer with a
// proof of the cluster key (apps/launch/page_steering.hpp): the HMAC of
// "troupe page steer\n" and the body, which names a fresh challenge from
// /api/challenge. The key stays in this page's memory (a reload forgets
// it) and never goes on the wire. Without it every command is refused,
// and the page says why.
"use strict";

const PROOF_LABEL = "troupe page steer\n";
let steeringKey = null; // Uint8Array(32) once given

function say(text, bad) {
  const p = document.getElementById("steer-answer");
  p.textContent = text;
  p.className = bad ? "error" : "muted";
}

async function steer(command) {
  say(`${command}: sending`, false);
  try {
    const challenge = await getJson("/api/challenge");
    const body = JSON.stringify({ command, challenge: challenge.challenge });
    const headers = { "Content-Type": "application/json" };
    if (steeringKey) {
      const signed = new TextEncoder().encode(PROOF_LABEL + body);
      headers["X-Troupe-Proof"] = toHex(hmacSha256(steeringKey, signed));
    }
    const r = await fetch("/api/steer", {
      method: "POST", body, headers, cache: "no-store", credentials: "same-origin" });
    const answer = await r.json();
    if (!r.ok) {
      say(`${command}: refused (${r.status}): ${answer.error}`, true);
      return;
    }
    say(`${command}: ${JSON.stringify(answer.answer)}`, false);
  } catch (e) {
    say(`${command}: ${e.message}`, true);
  }
}

function setUpSteering() {
  document.getElementById("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("key");
    const text = input.value.trim();
    input.value = "";
    // An empty box keeps the key the page holds (pressing the button again
    // must not drop it); a wrong one drops it, so the page is read-only.
    if (!text) return say(steeringKey ? "the key is kept" : "no key given", !steeringKey);
    const key = fromHex(text);
    const state = document.getElementById("key-state");
    if (!key || key.length !== 32) {
      steeringKey = null;
      state.textContent = "no key (read-only)";
      say("a cluster key is 64 hex digits: the text of cluster.key on the chief's host", true);
      return;
    }
    steeringKey = key;
    state.textContent = "key given";
    say("the key is held by this page until it is reloaded", false);
  });
  for (const b of document.querySelectorAll("button[data-command]"))
    b.addEventListener("click", () => steer(b.dataset.command));
  document.getElementById("lr-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    steer(`set lr ${document.getElementById("lr").value.trim()}`);
  });
  document.getElementById("command-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    steer(document.getElementById("command").value.trim());
  });
}

setUpSteering();
