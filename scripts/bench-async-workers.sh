#!/usr/bin/env bash
# Test accuracy as workers are added, by update rule, across processes, in
# one run. config/local.json's run (MLP 784-256-128-10, Adam 0.001, batch
# 128 per worker) for EPOCHS epochs: a chief process, two shard processes
# of two shards each, and the workers in up to four worker processes, on
# 127.0.0.1. For each worker count, the rules:
#   async as it runs by default across processes: stale_lr divide, the
#   workers prefetching and looking ahead (prefetch and stale_lookahead
#   "auto"); the same with gap;
#   without prefetch: async, stale_lr divide, none, gap;
#   async, divide with delay_compensation 2 (DC-ASGD-a);
#   async, divide and gap with stale_lookahead 1;
#   sync (every worker's push in each update), sync_lr none and sqrt, and
#   linear reached over the first 30 updates (sync_warmup 30);
# then PyTorch alone on the same model, batch and epochs (one process,
# bench/pytorch_mlp_adam.py). Every run is given the learning rate of one
# worker; troupe's one worker runs without prefetch, plain SGD's order. Prints each rule's median test accuracy over REPEATS runs and its
# distance in points from troupe's one worker.
# Usage: scripts/bench-async-workers.sh [epochs, default 4]
#          [worker counts, default "4 8 16"] [repeats, default 1]
#          [rules: words, a rule runs if its name holds one; default all]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-4}" "${2:-4 8 16}" "${3:-1}" "${4:-}" <<'PY'
import json, os, statistics, subprocess, sys

from benchlib import (chief_summary, free_port, run_json_script,
                      scratch_dir)

epochs, counts, repeats = int(sys.argv[1]), [int(w) for w in sys.argv[2].split()], int(sys.argv[3])
node = os.environ["TROUPE_BUILD"] + "/apps/troupe-node"
work = scratch_dir()
no_prefetch = {"prefetch": False}
rules = {"async default": {},
         "async default, gap": {"stale_lr": "gap"},
         "async divide": no_prefetch,
         "async none": dict(no_prefetch, stale_lr="none"),
         "async gap": dict(no_prefetch, stale_lr="gap"),
         "async divide+dc": dict(no_prefetch, delay_compensation=2),
         "async divide+lookahead": dict(no_prefetch, stale_lookahead=1),
         "async gap+lookahead": dict(no_prefetch, stale_lr="gap",
                                     stale_lookahead=1),
         "sync none": {"mode": "sync", "sync_lr": "none"},
         "sync sqrt": {"mode": "sync", "sync_lr": "sqrt"},
         "sync linear, warm-up 30": {"mode": "sync", "sync_lr": "linear",
                                     "sync_warmup": 30}}
if sys.argv[4].split():
    rules = {r: extra for r, extra in rules.items()
             if any(word in r for word in sys.argv[4].split())}
    if not rules:
        sys.exit(f"no rule's name holds any of: {sys.argv[4]}")


def cluster_file(workers, extra):
    c = json.load(open("config/local.json"))
    c["training"].update({"epochs": epochs, "eval_every_steps": 10**9,
                          "log_every_steps": 10**9})
    hosts = min(workers, 4)
    nodes = [{"name": "chief", "host": "127.0.0.1", "port": free_port()}]
    nodes += [{"name": f"ps{i}", "host": "127.0.0.1", "port": free_port(),
               "shards": 2} for i in range(2)]
    nodes += [{"name": f"w{i}", "host": "127.0.0.1", "port": free_port(),
               "workers": workers // hosts + (i < workers % hosts)}
              for i in range(hosts)]
    c["cluster"] = dict({"mode": "async", "chief": "chief", "nodes": nodes},
                        **extra)
    path = f"{work}/cluster.json"
    json.dump(c, open(path, "w"))
    return path, [n["name"] for n in nodes[1:]]


def troupe(workers, extra):
    """The chief's test accuracy."""
    path, members = cluster_file(workers, extra)
    procs = [subprocess.Popen([node, "--config", path, "--node", m],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for m in members]
    out = subprocess.run([node, "--config", path, "--node", "chief"],
                         capture_output=True, text=True)
    for p in procs:
        p.wait(timeout=120)
    if out.returncode != 0:
        sys.exit(f"troupe-node chief failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return chief_summary(out.stdout)[1]


def median_of(f):
    return statistics.median(f() for _ in range(repeats))


one = median_of(lambda: troupe(1, no_prefetch))
torch = median_of(lambda: run_json_script(
    ["bench/pytorch_mlp_adam.py", "--batch", "128", "--epochs", str(epochs)])
    ["test_accuracy"])
print(f"{epochs} epochs, Adam 0.001, batch 128 per worker, medians of {repeats}; "
      f"troupe 1 worker {one:.4f}, PyTorch alone {torch:.4f} "
      f"({100 * (torch - one):+.2f} pt)", flush=True)
print(f"{'workers':>7} " + " ".join(f"{r:>24}" for r in rules), flush=True)
for w in counts:
    acc = {r: median_of(lambda: troupe(w, extra)) for r, extra in rules.items()}
    print(f"{w:>7} " + " ".join(
        f"{acc[r]:>16.4f} ({100 * (acc[r] - one):+5.1f})" for r in rules),
        flush=True)
PY
