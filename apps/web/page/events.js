// The chief's log on the page (/api/log): its recent events (every line
// but the progress lines: joins, losses, recoveries, takeovers, moves,
// checkpoints, pauses) newest first, and a tail of the whole log. Lines
// are fetched past the last one seen, so each poll brings only new ones.
"use strict";

const MAX_LOG_LINES = 500;
const MAX_EVENTS = 40;
const log = { lines: [], last: 0, started: null };
// Progress, not events: "step 400, epoch 0.85, ...", the evaluations'
// "step 400, epoch 0.85: test accuracy ...", "worker 1: step ..." (but
// "step 400: checkpoint ..." is an event).
const PROGRESS = /^(\[INSECURE links\] )?(step \d+, |worker \d+: step \d+)/;

function takeLog(answer) {
  if (answer.started_unix_ms !== log.started) { // another chief's process
    if (log.started !== null && log.last > 0) {
      log.started = answer.started_unix_ms;
      log.last = 0; // its lines from the start, at the next poll
      return;
    }
    log.started = answer.started_unix_ms;
  }
  log.lines.push(...answer.lines);
  if (log.lines.length > MAX_LOG_LINES) log.lines.splice(0, log.lines.length - MAX_LOG_LINES);
  log.last = answer.last;
  if (!answer.lines.length) return;
  const time = (l) => new Date(l.unix_ms).toLocaleTimeString();
  const events = log.lines.filter((l) => !PROGRESS.test(l.text)).slice(-MAX_EVENTS).reverse();
  const list = document.getElementById("events");
  list.replaceChildren(...events.map((l) => {
    const li = el("li");
    li.append(el("span", time(l), "muted"), " ", el("span", l.text));
    return li;
  }));
  document.getElementById("log-tail").textContent =
    log.lines.map((l) => `${time(l)}  ${l.text}`).join("\n");
}
