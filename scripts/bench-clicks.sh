#!/usr/bin/env bash
# The click model's samples/s next to PyTorch's, in one run, alternating
# REPEATS times; medians and ratios, with each run's test log-loss and
# AUC. The data: 1M training and 100k test click logs from troupe-clicks
# (4 numeric and 8 categorical fields of 100000 Zipf-1.1 values each,
# seed 7; about 555k distinct rows), written once into DIR. Every run:
# dim 8, MLP 64-32, batch 256, Adam 0.001 for the MLP, lazy Adam 0.01 for
# the rows (PyTorch: SparseAdam), async, one epoch.
#   one process: troupe-node embedded (2 workers, 2 shards) next to
#     bench/pytorch_clicks.py --mode local (one loop; one torch thread,
#     which trains this small model faster than two: 2 threads spend more
#     in forward, backward and SparseAdam's step than they save);
#   across processes on 127.0.0.1: troupe with one shard process and two
#     worker processes (and its chief process) next to --mode rpc (one
#     parameter-server process and two worker processes, rows pulled and
#     pushed through torch.distributed.rpc).
# Usage: scripts/bench-clicks.sh [repeats, default 3] [DIR, default
#                                 runs/bench-clicks]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
dir="${2:-runs/bench-clicks}"
troupe_bench_click_logs "$dir"
exec /usr/bin/python3 - "${1:-3}" "$dir" <<'PY'
import os, re, subprocess, sys

from benchlib import (free_port, medians_of_rounds, run_json_script,
                      scratch_dir, write_click_bench_config)

repeats, data = int(sys.argv[1]), os.path.abspath(sys.argv[2])
node = os.environ["TROUPE_BUILD"] + "/apps/troupe-node"
work = scratch_dir()


def config(name, cluster):
    return write_click_bench_config(f"{work}/{name}.json", "bench-clicks",
                                    data, "train.tsv", cluster)

def troupe_result(out):
    if out.returncode != 0:
        sys.exit(f"troupe-node failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    scores = re.findall(r"test loss = ([0-9.]+), test AUC = ([0-9.]+)",
                        out.stdout)
    row = out.stdout.strip().splitlines()[-1].split()
    return float(row[7]), float(scores[-1][0]), float(scores[-1][1])

def troupe_embedded():
    path = config("embedded", {"shards": 2, "workers": 2})
    return troupe_result(subprocess.run([node, "--config", path],
                                        capture_output=True, text=True))

def troupe_processes():
    nodes = [{"name": "chief", "host": "127.0.0.1", "port": free_port()},
             {"name": "ps0", "host": "127.0.0.1", "port": free_port(), "shards": 1}]
    nodes += [{"name": f"w{i}", "host": "127.0.0.1", "port": free_port(),
               "workers": 1} for i in range(2)]
    path = config("processes", {"chief": "chief", "nodes": nodes})
    procs = [subprocess.Popen([node, "--config", path, "--node", n["name"]],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for n in nodes[1:]]
    out = subprocess.run([node, "--config", path, "--node", "chief"],
                         capture_output=True, text=True)
    for p in procs:
        p.wait(timeout=60)
    return troupe_result(out)

def pytorch(mode):
    r = run_json_script(
        ["bench/pytorch_clicks.py", "--data", data, "--numeric", "4",
         "--categorical", "8", "--mode", mode, "--workers", "2",
         "--threads", "1", "--port", str(free_port())])
    return r["samples_per_sec"], r["test_log_loss"], r["test_auc"]

runs = {"troupe, one process": troupe_embedded,
        "pytorch, one process": lambda: pytorch("local"),
        "troupe, 4 processes": troupe_processes,
        "pytorch rpc, 3 processes": lambda: pytorch("rpc")}


def say(r, name, result):
    rate, loss, auc = result
    print(f"round {r}: {name}: {rate:.0f} samples/s, test log-loss "
          f"{loss:.4f}, AUC {auc:.4f}", flush=True)


median = medians_of_rounds(runs, repeats, say)
print(f"\none epoch of 1M click logs, medians of {repeats}")
print(f"{'':26} {'samples/s':>10} {'x pytorch':>9} {'log-loss':>8} "
      f"{'AUC':>7}")
pairs = [("troupe, one process", "pytorch, one process"),
         ("troupe, 4 processes", "pytorch rpc, 3 processes")]
for ours, theirs in pairs:
    for name in (ours, theirs):
        rate, loss, auc = median[name]
        print(f"{name:26} {rate:>10.0f} {rate / median[theirs][0]:>8.2f}x "
              f"{loss:>8.4f} {auc:>7.4f}")
PY
