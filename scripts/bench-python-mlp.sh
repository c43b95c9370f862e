#!/usr/bin/env bash
# Python workers on troupe's shards next to PyTorch's RPC parameter server
# on a model where the exchange, not the compute, sets the pace: the MLP
# of scripts/bench-rpc-ps.sh (784-100-10, ReLU, He init, SGD 0.1, batch
# 100, Fashion-MNIST, every sample once per epoch), in one run,
# alternating REPEATS times; medians and ratios.
# - troupe, Python workers: node ps (the chief and one shard) and two
#   worker processes, each a PyTorch step function on one thread
#   (bench/python_mlp_node.py through troupe.run_node), async; and the
#   same in sync, each worker taking 50 of the 100;
# - troupe, C++ workers: the same cluster with troupe's own MLP
#   (troupe-node), async: what the Python step costs;
# - pytorch rpc ps: bench/pytorch_rpc_ps.py, one server and two trainers
#   with one thread each, async.
# Prints test accuracy and samples/s (trained samples over the training
# time) of each, and each over the RPC server's.
# Usage: scripts/bench-python-mlp.sh [epochs, default 3] [repeats, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
# bench/pytorch_rpc_ps.py's model, for the same initial values.
export PYTHONPATH="$TROUPE_ROOT/bench:$PYTHONPATH"
exec /usr/bin/python3 - "${1:-3}" "${2:-3}" <<'PY'
import json, os, statistics, subprocess, sys, time

import troupe
from benchlib import (chief_summary, free_port, run_pytorch_rpc_ps,
                      run_troupe_cluster, scratch_dir)
from pytorch_rpc_ps import make_model

epochs, repeats = int(sys.argv[1]), int(sys.argv[2])
build = os.environ["TROUPE_BUILD"]
data = "/usr/share/datasets/fashion-mnist"
python = "/usr/bin/python3"
work = scratch_dir()
params = os.path.join(work, "mlp.safetensors")
troupe.write_parameters(params, make_model(100, 1).state_dict())


def cluster_file(name, model, mode, batch, extra={}):
    nodes = [{"name": "ps", "host": "127.0.0.1", "port": free_port(),
              "shards": 1}]
    nodes += [{"name": f"w{i}", "host": "127.0.0.1", "port": free_port(),
               "workers": 1} for i in range(2)]
    c = {"name": "python-mlp-" + name, "model": model,
         "training": {"batch_size": batch, "epochs": epochs, "seed": 1,
                      "threads": 1, "eval_every_steps": 10**9,
                      "log_every_steps": 10**9,
                      "optimizer": {"type": "sgd", "learning_rate": 0.1}},
         "cluster": dict({"mode": mode, "chief": "ps", "nodes": nodes},
                         **extra)}
    if model["type"] == "external":
        c["data"] = {"format": "external", "train_samples": 60000}
    else:
        c["data"] = {"format": "idx", "dir": data}
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def python_workers(mode, extra={}):
    # sync averages the two workers' gradients: 50 each make a step of 100
    config = cluster_file("py-" + mode, {"type": "external",
                                         "parameters": params},
                          mode, 50 if mode == "sync" else 100, extra)
    key = config + ".key"
    if os.path.exists(key):
        os.remove(key)

    def node(name, **kw):
        return subprocess.Popen(
            [python, "bench/python_mlp_node.py", "--config", config,
             "--node", name, "--key", key, "--data", data], **kw)
    chief = node("ps", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(key) and time.monotonic() < deadline:
        time.sleep(0.05)  # the chief writes the cluster key
    workers = [node(w, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for w in ("w0", "w1")]
    out, err = chief.communicate()
    for w in workers:
        w.wait(timeout=60)
    if chief.returncode != 0:
        sys.exit(f"troupe {mode} failed:\n{out[-2000:]}{err[-2000:]}")
    return chief_summary(out)


def cpp_workers():
    config = cluster_file("cpp", {"type": "mlp", "hidden": [100],
                                  "activation": "relu", "init": "he",
                                  "seed": 1}, "async", 100)
    return run_troupe_cluster(os.path.join(build, "apps", "troupe-node"),
                              config, "ps", ["w0", "w1"])


def rpc():
    return run_pytorch_rpc_ps(["--data", data, "--workers", "2", "--epochs",
                               str(epochs)])


runs = {"troupe, Python workers, async": lambda: python_workers("async"),
        "troupe, Python workers, async, prefetch":
            lambda: python_workers("async", {"prefetch": True}),
        "troupe, Python workers, sync": lambda: python_workers("sync"),
        "troupe, C++ workers, async": cpp_workers,
        "pytorch rpc ps, async": rpc}
results = {name: [] for name in runs}
for r in range(repeats):
    for name, run in runs.items():
        results[name].append(run())
        rate, acc = results[name][-1]
        print(f"run {r + 1} {name}: {rate:.0f} samples/s, test accuracy "
              f"{acc:.4f}", flush=True)
median = {name: (statistics.median(x[0] for x in v),
                 statistics.median(x[1] for x in v))
          for name, v in results.items()}
rpc_rate = median["pytorch rpc ps, async"][0]
print(f"\nMLP 784-100-10, {epochs} epochs, batch 100, SGD 0.1, 2 worker "
      f"processes; medians of {repeats} runs")
print(f"{'':40} {'samples/s':>10} {'test acc':>9} {'x rpc ps':>9}")
for name, (rate, acc) in median.items():
    print(f"{name:40} {rate:>10.0f} {acc:>9.4f} {rate / rpc_rate:>8.2f}x")
PY
