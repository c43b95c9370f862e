// The runs of the chief's metrics folder side by side (/api/runs): test
// accuracy by seconds and training loss by step, one colour per run, from
// each run's CSV files, which the page also offers to download. Read when
// the page opens and every 15 s after.
"use strict";

const HISTORY_MS = 15000;
const MAX_RUNS = 8;
const COLOURS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#e16f24", "#6e7781"];
const history = { runs: [] };

/// The rows of a CSV file of troupe's metrics ("# run=..." first, then
/// the column names): [{column: number}].
function csvRows(text) {
  const lines = text.split("\n").filter((l) => l && !l.startsWith("#"));
  if (!lines.length) return [];
  const names = lines[0].split(",");
  return lines.slice(1).map((l) => {
    const row = {};
    l.split(",").forEach((v, i) => { row[names[i]] = Number(v); });
    return row;
  });
}

async function getText(path) {
  const r = await fetch(path, { cache: "no-store", credentials: "same-origin" });
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return r.text();
}

function runName(run) {
  const m = /run=(\S+) run_id=(\S{0,8})/.exec(run.label);
  return m ? `${m[1]} ${m[2]}` : run.file;
}

async function readHistory() {
  try {
    const runs = (await getJson("/api/runs")).slice(-MAX_RUNS);
    document.getElementById("history").hidden = runs.length === 0;
    const read = await Promise.all(runs.map(async (run, i) => ({
      run, colour: COLOURS[i % COLOURS.length],
      evaluations: run.evaluations ? csvRows(await getText(run.evaluations)) : [],
      progress: run.progress ? csvRows(await getText(run.progress)) : [],
    })));
    history.runs = read;
    const score = (row) => row.test_accuracy ?? row.test_r2 ?? row.test_auc;
    chart("chart-history-score", read.map((h) => ({ name: runName(h.run), colour: h.colour,
      points: h.evaluations.map((r) => [r.seconds, score(r)]).filter((p) => Number.isFinite(p[1])) })),
      "seconds");
    chart("chart-history-loss", read.map((h) => ({ name: runName(h.run), colour: h.colour,
      points: h.progress.map((r) => [r.step, r.loss]).filter((p) => Number.isFinite(p[1])) })),
      "step");
    document.getElementById("runs").replaceChildren(...read.map((h) => {
      const li = el("li");
      const swatch = el("span", "\u25A0");
      swatch.style.color = h.colour;
      li.append(swatch, " ", el("span", h.run.label || h.run.file), " ");
      for (const [key, title] of [["evaluations", "evaluations.csv"], ["progress", "progress.csv"]]) {
        if (!h.run[key]) continue;
        const a = el("a", title);
        a.href = h.run[key];
        a.download = "";
        li.append(" ", a);
      }
      return li;
    }));
  } catch (e) {
    // The live views say when the chief is gone; history waits for it.
  }
  setTimeout(readHistory, HISTORY_MS);
}

readHistory();
