#!/usr/bin/env bash
# A table of about 50M rows x 16 floats trained from Python across
# processes: node ps0 (the chief and shard 0), ps1 (shard 1) and two
# Python worker processes w0, w1 (bench/table_scale_node.py), async, one
# epoch of 6M samples of 16 keys each drawn uniformly from 70M (about 52M
# distinct keys: each a row made on the shards as it is first pulled),
# batches of 512, Adagrad rows (values and accumulator). Prints the rows
# each shard holds and their memory (troupe-shell's shards), each
# process's peak resident memory, and the rows the workers pulled and
# pushed per second; then the same workers' peak memory on a table of
# 1000 rows (the same keys modulo 1000, 2000 steps): what a worker holds
# does not grow with the table.
# Needs about 12 GiB of memory.
# Usage: scripts/tables-scale.sh [DIR, default runs/tables-scale]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
dir="${1:-$TROUPE_ROOT/runs/tables-scale}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
export OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 - "$dir" <<'PY'
import json, os, subprocess, sys, time

from benchlib import free_port

root = sys.argv[1]
node_script = os.path.abspath("bench/table_scale_node.py")
shell = os.path.join(os.environ["TROUPE_BUILD"], "apps", "troupe-shell")
python = "/usr/bin/python3"
samples = 6_000_000


def run(name, vocabulary, max_steps=0):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    config = os.path.join(d, "cluster.json")
    ports = {n: free_port() for n in ("ps0", "ps1", "w0", "w1")}
    with open(config, "w") as f:
        json.dump({
            "name": "tables-" + name,
            "model": {"type": "external",
                      "parameters": os.path.join(d, "model.safetensors"),
                      "tables": [{"name": "ids", "vocabulary": vocabulary,
                                  "dim": 16}]},
            "data": {"format": "external", "train_samples": samples},
            "training": {"batch_size": 512, "epochs": 1,
                         "max_steps": max_steps, "log_every_steps": 2000,
                         "optimizer": {"type": "adam",
                                       "learning_rate": 0.001}},
            "cluster": {"mode": "async", "node_timeout_s": 120, "nodes": [
                {"name": "ps0", "host": "127.0.0.1", "port": ports["ps0"],
                 "shards": 1},
                {"name": "ps1", "host": "127.0.0.1", "port": ports["ps1"],
                 "shards": 1},
                {"name": "w0", "host": "127.0.0.1", "port": ports["w0"],
                 "workers": 1},
                {"name": "w1", "host": "127.0.0.1", "port": ports["w1"],
                 "workers": 1}]}}, f)
    subprocess.run([python, node_script, config, "prepare", "0", "0"],
                   check=True)
    procs, logs = {}, {}
    for n in ("ps0", "ps1", "w0", "w1"):
        logs[n] = os.path.join(d, n + ".log")
        procs[n] = subprocess.Popen(
            [python, node_script, config, n, str(samples), str(vocabulary)],
            stdout=open(logs[n], "w"), stderr=subprocess.STDOUT)
        if n == "ps0":
            time.sleep(1)  # the chief makes the cluster key
    # The shards' rows and memory, asked near the end of the epoch.
    shards = None
    began = time.monotonic()
    while procs["ps0"].poll() is None:
        time.sleep(2)
        out = subprocess.run(
            [shell, "--connect", "127.0.0.1:%d" % ports["ps0"], "--key",
             os.path.join(d, "cluster.key"), "-c", "shards", "--json"],
            capture_output=True, text=True)
        if out.returncode == 0:
            shards = out.stdout
    for n, p in procs.items():
        if p.wait() != 0:
            sys.exit(f"{name}: node {n} failed: see {logs[n]}")
    results = {}
    for n in procs:
        for line in open(logs[n]):
            if line.startswith("{"):
                results[n] = json.loads(line)
    return results, shards, time.monotonic() - began


big, shards, seconds = run("50m", 70_000_000)
print(f"one epoch of {samples} samples in {seconds:.0f} s")
print("shards near the end:", shards)
gib = 1 << 30
for n, r in big.items():
    line = f"{n}: peak resident memory {r['peak_rss_bytes'] / gib:.2f} GiB"
    if "rows_per_sec" in r:
        line += f", {r['rows_per_sec'] / 1e6:.2f}M rows/s pulled+pushed"
    print(line)
small, _, _ = run("1k", 1000, max_steps=2000)
for n in ("w0", "w1"):
    print(f"{n}: peak resident memory {small[n]['peak_rss_bytes'] / gib:.2f}"
          f" GiB with a table of 1000 rows, "
          f"{big[n]['peak_rss_bytes'] / gib:.2f} GiB with the large one")
PY
