// The run's page: polls the chief's /api/ views once a second and draws
// them. Every name and value goes into the page as text (textContent),
// never as markup: node and run names come from configs and joining nodes.
"use strict";

const POLL_MS = 1000;
const MAX_POINTS = 2000;
const series = { loss: [], accuracy: [], rate: [] };
let lastFailure = null;
// The last poll's cost in ms: its requests' answers, and drawing them
// (the footer shows both; a test holds a 200-worker table to them).
const lastPoll = { fetch_ms: 0, render_ms: 0, polls: 0 };

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function fmt(v, digits) {
  if (v === null || v === undefined || v === "") return "-";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) return "-";
    if (Number.isInteger(v)) return v.toLocaleString("en");
    return Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(digits || 4);
  }
  return String(v);
}

function duration(s) {
  if (typeof s !== "number" || s < 0) return "-";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, r = s % 60;
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(r).padStart(2, "0")}s` : `${r}s`;
}

function bytes(b) {
  if (typeof b !== "number") return "-";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i + 1 < u.length) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b.toFixed(0)) + " " + u[i];
}

function push(list, point) {
  const last = list[list.length - 1];
  if (last && last[0] === point[0]) { list[list.length - 1] = point; return; }
  list.push(point);
  if (list.length > MAX_POINTS) // keep every other of the older half
    list.splice(0, list.length, ...list.filter((p, i) => i >= MAX_POINTS / 2 || i % 2 === 0));
}

// The run's state: how it ended once it has (the port keeps its last view
// a few seconds for a page that watches), else what it does now.
function runState(run) {
  if (run.outcome) return run.outcome;
  if (run.stopping) return "stopping";
  if (run.recovering) return "recovering";
  if (run.paused) return "paused";
  if (run.phase === "waiting_for_nodes") return "waiting for nodes";
  if (run.phase === "starting" || run.phase === "finishing") return run.phase;
  return "training";
}

// How the run ended, once the page has seen it (kept when the port goes).
let ended = null;

function showRun(status) {
  const run = status.run;
  document.getElementById("run-name").textContent = run.name;
  document.title = "troupe: " + run.name;
  const state = runState(run);
  const badge = document.getElementById("run-state");
  badge.textContent = state;
  badge.className = "badge " + state.replace(/ /g, "-");
  if (run.outcome) ended = run;
  document.getElementById("run-line").textContent =
    `${run.mode}, run ${run.run_id}, config ${String(run.config_digest).slice(0, 12)}`;
  const figures = document.getElementById("figures");
  figures.replaceChildren();
  const add = (label, value) => {
    const d = el("div");
    d.append(el("b", value), el("span", label, "muted"));
    figures.append(d);
  };
  add("step", `${fmt(run.steps)} of ${fmt(run.total_steps)}`);
  add("epoch", fmt(run.epoch, 3));
  add("samples/s", fmt(run.examples_per_sec));
  add("elapsed (without pauses)", duration(run.seconds));
  add("ETA", duration(run.eta_seconds));
  add("loss", fmt(run.loss));
  add("test accuracy", fmt(run.test_accuracy));
  add("learning rate", fmt(run.learning_rate));
  add("restarts", fmt(run.restarts));
  add("shard recoveries", `${fmt(run.shard_recoveries)} (${fmt(run.lost_steps)} steps lost)`);
  add("last checkpoint", run.checkpoint
    ? `step ${fmt(run.checkpoint.step)}, ${duration(run.checkpoint.age_seconds)} ago (${fmt(run.checkpoint.took_seconds, 2)} s)`
    : run.last_checkpoint || "-");
  if (run.last_export)
    add("last export", `${fmt(run.last_export.sequence)} at step ${fmt(run.last_export.step)}, ${duration(run.last_export.age_seconds)} ago`);
  document.getElementById("run-json").textContent = JSON.stringify(run, null, 2);
  // troupe-train's one process has no chief to steer.
  document.getElementById("steer").hidden = run.mode === "local";
  if (typeof run.loss === "number") push(series.loss, [run.steps, run.loss]);
  if (typeof run.test_accuracy === "number") push(series.accuracy, [run.steps, run.test_accuracy]);
  if (typeof run.examples_per_sec === "number" && run.seconds > 0)
    push(series.rate, [run.seconds / 60, run.examples_per_sec]);
}

function median(values) {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  return v.length ? v[Math.floor(v.length / 2)] : 0;
}

function table(id, columns, rows, rowClass) {
  const t = document.getElementById(id);
  const head = el("tr");
  for (const [, title] of columns) head.append(el("th", title));
  const body = [head];
  for (const r of rows) {
    const tr = el("tr", undefined, rowClass ? rowClass(r) : "");
    for (const [key, , show] of columns) tr.append(el("td", show ? show(r[key], r) : fmt(r[key])));
    body.push(tr);
  }
  t.replaceChildren(...body);
}

// Each shard's bytes pulled and pushed at the last view, for its rates.
const shardBytes = new Map();

/// Bytes per second pulled from and pushed to each shard since the last
/// view (null until there are two).
function addShardRates(shards, takenMs) {
  for (const s of shards) {
    const before = shardBytes.get(s.id);
    const seconds = before ? (takenMs - before.at) / 1000 : 0;
    if (before && seconds > 0 && typeof s.pulled_bytes === "number") {
      s.pull_rate = Math.max(0, (s.pulled_bytes - before.pulled) / seconds);
      s.push_rate = Math.max(0, (s.pushed_bytes - before.pushed) / seconds);
    }
    if (!before || seconds > 0)
      shardBytes.set(s.id, { at: takenMs, pulled: s.pulled_bytes, pushed: s.pushed_bytes });
  }
}

function showActors(status) {
  const workers = status.actors.filter((a) => a.role === "worker");
  const shards = status.actors.filter((a) => a.role === "shard");
  addShardRates(shards, status.view.taken_unix_ms);
  const perSecond = (v) => typeof v === "number" ? bytes(v) + "/s" : "-";
  // Marked: a worker whose staleness is past twice the median (and 4), or
  // whose rate is under half the median of the running ones.
  const running = workers.filter((w) => w.state === "running");
  const stale = Math.max(4, 2 * median(running.map((w) => w.staleness)));
  const slow = 0.5 * median(running.map((w) => w.examples_per_sec));
  const mark = (w) => w.state !== "running" ? "down"
    : w.staleness > stale ? "stale" : w.examples_per_sec < slow ? "stale" : "";
  document.getElementById("workers-count").textContent =
    `${running.length} of ${workers.length} running`;
  table("workers", [["id", "worker"], ["node", "node"], ["state", "state"],
    ["step", "step"], ["examples_per_sec", "samples/s"], ["staleness", "staleness"],
    ["mean_staleness", "mean staleness"], ["loss", "loss"], ["restarts", "restarts"],
    ["last_error", "last failure"]], workers, mark);
  table("shards", [["id", "shard"], ["node", "node"], ["state", "state"],
    ["version", "version"], ["size", "parameters"], ["rows", "rows"],
    ["pulled_bytes", "pulled", bytes], ["pushed_bytes", "pushed", bytes],
    ["pull_rate", "pulls", perSecond], ["push_rate", "pushes", perSecond],
    ["replica_node", "replica"], ["replica", "replica state"], ["replica_lag", "lag"]],
    shards, (s) => s.state !== "running" ? "down" : "");
  showTables(shards);
}

// Embedding tables, a row per shard's slice of each: its rows and their
// bytes, rows pulled and pushed, and admission (rows made, rejected by the
// filter) and eviction; hidden for a run without tables.
function showTables(shards) {
  const rows = shards.flatMap((s) => (s.tables || []).map((t) => ({ shard: s.id, ...t })));
  document.getElementById("tables-section").hidden = rows.length === 0;
  if (!rows.length) return;
  table("tables", [["shard", "shard"], ["name", "table"], ["rows", "rows"],
    ["row_bytes", "memory", bytes], ["rows_pulled", "pulled"], ["rows_pushed", "pushed"],
    ["rows_made", "admitted"], ["rows_rejected", "rejected"], ["rows_evicted", "evicted"]], rows);
}

// A process's start as this browser's time of day, and how long ago.
function upSince(unix) {
  if (typeof unix !== "number") return "-";
  const time = new Date(unix * 1000).toLocaleTimeString("en-GB");
  return `${time} (${duration(Date.now() / 1000 - unix)})`;
}

function heardAgo(s) {
  return typeof s !== "number" ? "-" : s < 1 ? "now" : duration(s) + " ago";
}

// A node the chief has not heard from for this long (its agent did not
// answer the last views, which ask every half second) is marked before
// its links time out (3 s by default) and it is declared lost.
const SILENT_S = 2;

function showNodes(nodes) {
  document.getElementById("nodes-count").textContent =
    `${nodes.filter((n) => n.state === "up").length} of ${nodes.length} up`;
  table("nodes", [["name", "node"], ["address", "address"], ["state", "state"],
    ["shards", "shards"], ["workers", "workers"], ["pid", "pid"], ["host", "host"],
    ["process_started", "up since", upSince], ["heard_seconds_ago", "heard", heardAgo],
    ["resident_bytes", "memory", bytes], ["heap_bytes", "heap", bytes],
    ["cpu_seconds", "CPU s"], ["program", "program"]],
    nodes, (n) => n.state !== "up" ? "down"
      : typeof n.heard_seconds_ago !== "number" || n.heard_seconds_ago > SILENT_S ? "stale" : "");
}

// A line chart on a canvas: each series [[x, y], ...] with its colour and
// name; axes scaled to the data, y from 0 when all values are positive.
function chart(id, lines, xName) {
  const c = document.getElementById(id);
  const g = c.getContext("2d");
  const W = c.width, H = c.height, L = 48, R = 8, T = 8, B = 28;
  g.clearRect(0, 0, W, H);
  const pts = lines.flatMap((l) => l.points);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = "#667";
  if (pts.length < 2) { g.fillText("waiting for points", L, H / 2); return; }
  let [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  let [y0, y1] = [Math.min(0, ...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const Y = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  g.strokeStyle = "#d8dde3";
  g.beginPath();
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    g.moveTo(L, Y(y)); g.lineTo(W - R, Y(y));
    g.fillText(fmt(y, 3), 2, Y(y) + 4);
    const x = x0 + (x1 - x0) * i / 4;
    g.fillText(fmt(x, 3), Math.min(X(x), W - 40), H - 10);
  }
  g.stroke();
  g.fillText(xName, W - R - g.measureText(xName).width, H - B - 4);
  let legend = L + 4;
  for (const l of lines) {
    if (!l.points.length) continue;
    g.strokeStyle = l.colour;
    g.lineWidth = 1.5;
    g.beginPath();
    l.points.forEach(([x, y], i) => (i ? g.lineTo(X(x), Y(y)) : g.moveTo(X(x), Y(y))));
    g.stroke();
    g.lineWidth = 1;
    g.fillStyle = l.colour;
    g.fillText(l.name, legend, T + 10);
    legend += g.measureText(l.name).width + 12;
  }
  g.fillStyle = "#667";
}

function draw() {
  chart("chart-loss", [{ name: "loss", colour: "#0969da", points: series.loss },
    { name: "test accuracy", colour: "#1a7f37", points: series.accuracy }], "step");
  chart("chart-rate", [{ name: "samples/s", colour: "#8250df", points: series.rate }], "minutes");
}

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store", credentials: "same-origin" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || `${path}: ${r.status}`);
  return body;
}

async function poll() {
  try {
    const asked = performance.now();
    const [status, nodes, logged] = await Promise.all([getJson("/api/status"),
      getJson("/api/nodes"), getJson(`/api/log?after=${log.last}`)]);
    const answered = performance.now();
    showRun(status);
    showActors(status);
    showNodes(nodes);
    takeLog(logged);
    draw();
    lastPoll.fetch_ms = answered - asked;
    lastPoll.render_ms = performance.now() - answered;
    lastPoll.polls++;
    lastFailure = null;
    const failed = status.run.error;
    document.getElementById("run-error").textContent = failed ? "the run failed: " + failed : "";
    document.getElementById("run-error").hidden = !failed;
    document.getElementById("footer").textContent =
      `view ${fmt(status.view.age_seconds, 2)} s old at ${new Date().toLocaleTimeString()}` +
      ` (fetched in ${lastPoll.fetch_ms.toFixed(0)} ms, drawn in ${lastPoll.render_ms.toFixed(0)} ms)`;
  } catch (e) {
    lastFailure = e;
    const err = document.getElementById("run-error");
    const badge = document.getElementById("run-state");
    if (ended) { // the chief's process has exited after the run ended
      err.textContent = (ended.error ? "the run failed: " + ended.error + "; " : "") +
        "the chief's process has exited";
      badge.textContent = ended.outcome;
    } else {
      err.textContent = "the chief does not answer (" + e.message +
        "): its process stopped, or the network between here and it";
      badge.textContent = "gone";
    }
    err.hidden = false;
    badge.className = "badge " + badge.textContent;
  }
  setTimeout(poll, POLL_MS);
}

poll();
