#!/usr/bin/env bash
# A Python worker process killed with kill -9 and started again, as an
# operator does it: the PyTorch example (examples/pytorch_cnn) on node ps
# (chief, shard, evaluation) and two Python worker processes w0 and w1,
# async, on_node_loss "move". Once the run has trained a quarter of its
# steps, w1 is killed; its worker moves to w0 (one process then runs both
# workers, one step at a time under its GIL). DOWN seconds later w1 is
# started again under the same name: the chief sends worker 1 back to it
# once its step in flight ends.
# Prints, from the chief's progress lines (every 25 steps, each with the
# examples/s of its window) read as they come:
# - the rate before the kill (the median of the windows since the start,
#   the first two left out), and while w1 was down;
# - how long after w1's start the log said the worker went back, and how
#   long until a window's rate was again within 10% of before (and the
#   median of the windows after that);
# - that every sample was trained once per epoch.
# Usage: scripts/bench-python-rejoin.sh [epochs, default 2] [down seconds,
#        default 5] [samples, default 60000]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-2}" "${2:-5}" "${3:-60000}" <<'PY'
import json, os, re, signal, statistics, subprocess, sys, time

from benchlib import scratch_dir

epochs, down, samples = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
example = os.path.abspath("examples/pytorch_cnn")
run = os.path.join(scratch_dir(), "rejoin")
python = "/usr/bin/python3"
subprocess.run([python, "train.py", "prepare", run, "--epochs", str(epochs),
                "--samples", str(samples)], cwd=example, check=True,
               capture_output=True)
config = os.path.join(run, "cluster.json")
with open(config) as f:
    c = json.load(f)
c["training"]["log_every_steps"] = 25
c["cluster"]["on_node_loss"] = "move"
with open(config, "w") as f:
    json.dump(c, f)
total = epochs * -(-samples // 64)


def start(node, label):
    log = open(os.path.join(run, label + ".log"), "w")
    return subprocess.Popen([python, "train.py", "node", config, node],
                            cwd=example, stdout=log, stderr=subprocess.STDOUT)


chief = start("ps", "ps")
time.sleep(1)  # the chief makes the cluster key
workers = {"w0": start("w0", "w0"), "w1": start("w1", "w1")}
chief_log = os.path.join(run, "ps.log")
line = re.compile(r"^step (\d+), epoch [\d.]+, loss = [\d.]+, ([\d.]+) "
                  r"examples/sec", re.M)
seen, windows, events = 0, [], {}   # windows: (time seen, step, rate)
phase = "before"
deadline = time.monotonic() + 1800
while chief.poll() is None and time.monotonic() < deadline:
    text = open(chief_log).read()
    now = time.monotonic()
    for m in line.finditer(text, seen):
        windows.append((now, int(m.group(1)), float(m.group(2)), phase))
        seen = m.end()
    if phase == "before" and windows and windows[-1][1] >= total // 4:
        workers["w1"].send_signal(signal.SIGKILL)
        workers["w1"].wait()
        events["killed"] = time.monotonic()
        phase = "down"
    elif phase == "down" and time.monotonic() - events["killed"] >= down:
        workers["w1"] = start("w1", "w1-again")
        events["restarted"] = time.monotonic()
        phase = "after"
    if "back" not in events and "(its own, back)" in text:
        events["back"] = now
    time.sleep(0.05)
for p in workers.values():
    p.wait(timeout=60)
text = open(chief_log).read()
if chief.returncode != 0:
    sys.exit("the run failed:\n" + text[-3000:])
before = statistics.median(r for _, _, r, p in windows[2:] if p == "before")
during = [r for _, _, r, p in windows if p == "down"]
after = [(t, r) for t, _, r, p in windows if p == "after"]
# The first window that ends after the worker went back and is within
# 10% of before, and every window from then on.
back_at = events.get("back", float("inf"))
recovered = next((t for t, r in after if t > back_at and r >= 0.9 * before),
                 None)
later = [r for t, r in after if recovered is not None and t >= recovered]
per_epoch = re.search(r"samples trained per epoch:((?: \d+)+)", text)
print(f"rate before the kill: {before:.0f} examples/s "
      f"(median of {len([1 for w in windows[2:] if w[3] == 'before'])} "
      f"windows of 25 steps)")
if during:
    print(f"while w1 was down ({down:.0f} s): "
          f"{statistics.median(during):.0f} examples/s")
print("worker 1 went back to w1 "
      + (f"{events['back'] - events['restarted']:.1f} s after w1 started"
         if "back" in events else "never"))
print("rate within 10% of before "
      + (f"{recovered - events['restarted']:.1f} s after w1 started; "
         f"median after that {statistics.median(later):.0f} examples/s "
         f"({statistics.median(later) / before:.2f} of before)"
         if recovered is not None else "never"))
print("windows after w1 started (seconds: examples/s): "
      + ", ".join(f"{t - events['restarted']:.1f}: {r:.0f}" for t, r in after))
evals = [float(t) for t in re.findall(r"\(10000 examples in ([\d.]+) s", text)]
print(f"the chief's evaluations: {len(evals)}, {sum(evals):.1f} s in all "
      "(they share the cores with the workers)")
print("samples trained per epoch:" + per_epoch.group(1))
for l in text.splitlines():
    if "worker 1 " in l and ("moves" in l or "goes back" in l):
        print("log: " + l)
PY
