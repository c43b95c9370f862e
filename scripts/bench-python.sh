#!/usr/bin/env bash
# A Python worker's pull+push of a 4 MB model against the C++ round trip,
# side by side in one run: a troupe-node process holding one shard of a
# 1,048,576-float tensor, and a Python process (troupe.run_node) whose one
# worker, in sync mode and then in async mode, pulls it, calls a step
# that returns a zero gradient, and pushes that back; each step is one
# pull and one push on the data plane, the Python call and the gradient's
# copy into the push buffer (sync: the step waits for the shard's update
# of its push; async: the next pull is answered after it). Beside it bench-transfer's C++ pull+push of the same 4 MB
# between two processes (what the data plane costs without the worker,
# feeder and Python). Runs alternate; medians over REPEATS. Prints ms per
# step and per round trip, and Python's time over C++'s.
# Usage: scripts/bench-python.sh [repeats, default 3] [steps, default 200]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
repeats="${1:-3}"
steps="${2:-200}"
export PYTHONPATH="$TROUPE_BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
exec /usr/bin/python3 - "$TROUPE_BUILD" "$repeats" "$steps" <<'PY'
import json, os, re, statistics, subprocess, sys, time
import numpy as np
import troupe
from benchlib import free_port, scratch_dir

build, repeats, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
floats = 1 << 20
work = scratch_dir()
params = os.path.join(work, "model.safetensors")
troupe.write_parameters(params, {"w": np.zeros(floats, np.float32)})
key = os.path.join(work, "cluster.key")
zeros = np.zeros(floats, np.float32)


def python_run(mode):
    config = os.path.join(work, "run.json")
    with open(config, "w") as f:
        json.dump({
            "model": {"type": "external", "parameters": params},
            "data": {"format": "external", "train_samples": steps},
            "training": {"batch_size": 1, "epochs": 1,
                         "optimizer": {"type": "sgd", "learning_rate": 0.01},
                         "log_every_steps": 1000000},
            "cluster": {"mode": mode, "nodes": [
                {"name": "ps", "port": free_port(), "shards": 1},
                {"name": "py", "port": free_port(), "workers": 1}]}}, f)
    chief = subprocess.Popen(
        [os.path.join(build, "apps", "troupe-node"), "--config", config,
         "--node", "ps", "--key", key], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    stamps = []

    def step(values, samples):
        stamps.append(time.perf_counter())
        return {"w": zeros}, 0.0

    with open(os.devnull, "w") as quiet:
        saved = os.dup(1)
        os.dup2(quiet.fileno(), 1)
        try:
            code = troupe.run_node(config, "py", step, key=key)
        finally:
            os.dup2(saved, 1)
    chief.wait(timeout=60)
    assert code == 0 and len(stamps) == steps, (code, len(stamps))
    # The first steps connect and warm the heap: timed from the 20th on.
    timed = stamps[20:]
    return 1e3 * (timed[-1] - timed[0]) / (len(timed) - 1)


def cpp_run():
    out = subprocess.run(
        [os.path.join(build, "apps", "bench-transfer"), "--floats",
         str(floats), "--rounds", str(steps), "--key", key],
        capture_output=True, text=True, check=True).stdout
    return float(re.search(r": ([0-9.]+) ms per pull\+push", out).group(1))


runs = {"sync": [], "async": [], "cpp": []}
for _ in range(repeats):
    runs["sync"].append(python_run("sync"))
    runs["async"].append(python_run("async"))
    runs["cpp"].append(cpp_run())
m = {k: statistics.median(v) for k, v in runs.items()}
print(f"4 MB pull+push, medians of {repeats} runs ({steps} steps each):")
print(f"  Python worker step, sync (troupe.run_node)   {m['sync']:7.3f} ms  "
      f"{m['sync'] / m['cpp']:5.2f}x")
print(f"  Python worker step, async (troupe.run_node)  {m['async']:7.3f} ms  "
      f"{m['async'] / m['cpp']:5.2f}x")
print(f"  C++ round trip (bench-transfer, data plane)  {m['cpp']:7.3f} ms  "
      f" 1.00x")
PY
