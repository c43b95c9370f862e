#!/usr/bin/env bash
# troupe across processes next to PyTorch's RPC parameter server, in one
# run, alternating REPEATS times; medians and ratios. Both: one
# parameter-server process, WORKERS worker processes with one compute
# thread each, on 127.0.0.1; MLP 784-100-10 (ReLU, He init), SGD 0.1,
# batch 100, async, Fashion-MNIST, every sample once per epoch, test
# accuracy at the end. troupe runs as by default (stale_lr divide, no
# prefetch), with stale_lr none, and with prefetch; it has a chief
# process besides.
# The PyTorch side is bench/pytorch_rpc_ps.py (Debian's python3-torch).
# Usage: scripts/bench-rpc-ps.sh [epochs, default 3] [workers, default 2]
#                                [repeats, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-3}" "${2:-2}" "${3:-3}" <<'PY'
import json, os, statistics, sys

from benchlib import (free_port, run_pytorch_rpc_ps, run_troupe_cluster,
                      scratch_dir)

epochs, workers, repeats = (int(a) for a in sys.argv[1:4])
node = os.environ["TROUPE_BUILD"] + "/apps/troupe-node"
data = "/usr/share/datasets/fashion-mnist"
work = scratch_dir()


def cluster_file(name, extra):
    nodes = [{"name": "chief", "host": "127.0.0.1", "port": free_port()},
             {"name": "ps0", "host": "127.0.0.1", "port": free_port(), "shards": 1}]
    nodes += [{"name": f"w{i}", "host": "127.0.0.1", "port": free_port(),
               "workers": 1} for i in range(workers)]
    c = {"name": "rpc-ps-reference",
         "model": {"type": "mlp", "hidden": [100], "activation": "relu",
                   "init": "he", "seed": 1},
         "data": {"format": "idx", "dir": data},
         "training": {"batch_size": 100, "epochs": epochs, "seed": 1,
                      "threads": 1, "eval_every_steps": 10**9,
                      "log_every_steps": 10**9,
                      "optimizer": {"type": "sgd", "learning_rate": 0.1}},
         "cluster": dict({"mode": "async", "chief": "chief", "nodes": nodes},
                        **extra)}
    path = f"{work}/{name}.json"
    json.dump(c, open(path, "w"))
    return path, [n["name"] for n in nodes[1:]]

def troupe(name, extra):
    path, members = cluster_file(name, extra)
    return run_troupe_cluster(node, path, "chief", members)

def pytorch():
    return run_pytorch_rpc_ps(["--data", data, "--workers", str(workers),
                               "--epochs", str(epochs)])

variants = {"troupe (defaults)": {},
            "troupe stale_lr=none": {"stale_lr": "none"},
            "troupe prefetch=true": {"prefetch": True}}
runs = {name: [] for name in [*variants, "pytorch rpc ps"]}
for r in range(repeats):
    for i, (name, extra) in enumerate(variants.items()):
        runs[name].append(troupe(f"v{i}", extra))
    runs["pytorch rpc ps"].append(pytorch())
    for name, rows in runs.items():
        print(f"round {r + 1}: {name}: {rows[-1][0]:.0f} samples/s, "
              f"test accuracy {rows[-1][1]:.4f}", flush=True)

median = {name: (statistics.median(x for x, _ in rows),
                 statistics.median(a for _, a in rows))
          for name, rows in runs.items()}
ref_rate, ref_acc = median["pytorch rpc ps"]
print(f"\n{epochs} epochs, {workers} worker processes, 1 server process, "
      f"medians of {repeats}")
print(f"{'':24} {'samples/s':>10} {'x pytorch':>9} {'test acc':>8} "
      f"{'- pytorch':>9}")
for name, (rate, acc) in median.items():
    print(f"{name:24} {rate:>10.0f} {rate / ref_rate:>8.2f}x {acc:>8.4f} "
          f"{acc - ref_acc:>+9.4f}")
PY
