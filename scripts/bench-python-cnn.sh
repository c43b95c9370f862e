#!/usr/bin/env bash
# The PyTorch example (examples/pytorch_cnn: a CNN with dropout on
# Fashion-MNIST) on troupe against PyTorch alone and PyTorch's RPC
# parameter server, in one run: the same model, initial values, batch
# size (64 a step), SGD and epochs everywhere.
# - pytorch alone: one process, one thread (alone.py), on the batches the
#   troupe runs train (--order troupe: troupe.epoch_order);
# - troupe async, troupe sync: node ps (chief, one shard, the
#   evaluation) and two Python worker processes (train.py), one thread
#   each; in sync each worker takes 32 of the 64;
# - troupe async, kill -9: as async, with worker process w1 killed by
#   kill -9 in the middle of the second epoch and started again; the chief
#   waits for it (on_node_loss "wait") and every sample is still trained
#   once per epoch;
# - pytorch rpc ps: bench/pytorch_rpc_ps.py --model cnn, one server and
#   two trainers, async.
# - two pytorch alone at once: two alone.py processes, one epoch each,
#   side by side with nothing between them: what two worker processes can
#   compute on this machine at most (the ceiling of both troupe and RPC).
# Prints each run's test accuracy (and the points it is from PyTorch
# alone), samples/s, and troupe's over the RPC server's.
# With SEEDS > 1, PyTorch alone and the three troupe runs are repeated
# with seeds 1..SEEDS (each seed picks the initial values and the order
# of the samples, the same on both sides), and a last table gives each
# one's mean test accuracy over the seeds, its spread, and the mean's
# distance from PyTorch alone's mean: single runs differ by dropout and
# the order of async pushes, so the means are what to compare.
# Usage: scripts/bench-python-cnn.sh [epochs, default 3] [seeds, default 1]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-3}" "${2:-1}" <<'PY'
import json, os, re, signal, statistics, subprocess, sys, time

from benchlib import (chief_summary, run_json_script, run_pytorch_rpc_ps,
                      scratch_dir)

epochs, seeds = int(sys.argv[1]), int(sys.argv[2])
example = os.path.abspath("examples/pytorch_cnn")
work = scratch_dir()
python = "/usr/bin/python3"


def alone(seed):
    r = run_json_script(["alone.py", "--epochs", str(epochs), "--seed",
                         str(seed), "--order", "troupe"], cwd=example)
    return r["test_accuracy"], r["samples_per_sec"], ""


def troupe(name, mode, seed, kill=False):
    run = os.path.join(work, f"{name}-{seed}")
    subprocess.run([python, "train.py", "prepare", run, "--mode", mode,
                    "--epochs", str(epochs), "--seed", str(seed)],
                   cwd=example, check=True, capture_output=True)
    config = os.path.join(run, "cluster.json")
    if kill:
        with open(config) as f:
            c = json.load(f)
        c["cluster"]["on_node_loss"] = "wait"
        with open(config, "w") as f:
            json.dump(c, f)

    def start(node, label):
        log = open(os.path.join(run, label + ".log"), "w")
        return subprocess.Popen([python, "train.py", "node", config, node],
                                cwd=example, stdout=log,
                                stderr=subprocess.STDOUT)
    chief = start("ps", "ps")
    time.sleep(1)  # the chief makes the cluster key
    workers = [start("w0", "w0"), start("w1", "w1")]
    chief_log = os.path.join(run, "ps.log")
    note = ""
    if kill:
        # the middle of the second epoch: 1.5 epochs of 938 steps
        target = int(1.5 * 60000 / 64)
        while True:
            text = open(chief_log).read()
            steps = re.findall(r"^step (\d+), epoch", text, re.M)
            if steps and int(steps[-1]) >= target or chief.poll() is not None:
                break
            time.sleep(0.2)
        workers[1].send_signal(signal.SIGKILL)
        workers[1].wait()
        killed_at = int(steps[-1]) if steps else -1
        time.sleep(1)
        workers[1] = start("w1", "w1-again")
        note = f"w1 killed at step {killed_at}, restarted"
    code = chief.wait()
    for w in workers:
        w.wait(timeout=60)
    text = open(chief_log).read()
    if code != 0:
        sys.exit(f"troupe {name} failed:\n{text[-3000:]}")
    per_epoch = re.search(r"samples trained per epoch:((?: \d+)+)", text)
    once = per_epoch.group(1).split() == ["60000"] * epochs
    rate, accuracy = chief_summary(text)
    note += ("; " if note else "") + (
        "every sample once per epoch" if once
        else "samples per epoch:" + per_epoch.group(1))
    return accuracy, rate, note


def rpc():
    rate, accuracy = run_pytorch_rpc_ps(
        ["--model", "cnn", "--data", "/usr/share/datasets/fashion-mnist",
         "--workers", "2", "--epochs", str(epochs), "--batch", "64", "--lr",
         "0.05"])
    return accuracy, rate, ""


def two_at_once():
    procs = [subprocess.Popen([python, "alone.py", "--epochs", "1",
                               "--seed", str(seed)], cwd=example,
                              stdout=subprocess.PIPE, text=True)
             for seed in (1, 2)]
    rows = [json.loads(p.communicate()[0].strip().splitlines()[-1])
            for p in procs]
    # One epoch: its accuracy is not comparable (nan in the table).
    return (float("nan"), sum(r["samples_per_sec"] for r in rows),
            "1 epoch each, rates added")


results = {}
runs = [("pytorch alone", alone),
        ("troupe async", lambda seed: troupe("async", "async", seed)),
        ("troupe sync", lambda seed: troupe("sync", "sync", seed)),
        ("troupe async, kill -9",
         lambda seed: troupe("kill", "async", seed, kill=True))]
for seed in range(1, seeds + 1):
    for name, run in runs:
        results[(name, seed)] = run(seed)
        acc, rate, note = results[(name, seed)]
        print(f"seed {seed} {name}: test accuracy {acc:.4f}, {rate:.0f} "
              "samples/s" + (f" ({note})" if note else ""), flush=True)
for name, run in [("pytorch rpc ps", rpc),
                  ("two pytorch alone at once", two_at_once)]:
    results[(name, 1)] = run()
    acc, rate, note = results[(name, 1)]
    print(f"seed 1 {name}: test accuracy {acc:.4f}, {rate:.0f} samples/s"
          + (f" ({note})" if note else ""), flush=True)

base = results[("pytorch alone", 1)][0]
rpc_rate = results[("pytorch rpc ps", 1)][1]
print(f"\n{epochs} epochs, batch 64, SGD 0.05; troupe and RPC: 2 worker "
      "processes, one thread each; seed 1")
print(f"{'':26} {'test acc':>8} {'- alone':>8} {'samples/s':>10} "
      f"{'x rpc ps':>8}")
for (name, seed), (acc, rate, _) in results.items():
    if seed == 1:
        print(f"{name:26} {acc:>8.4f} {100 * (acc - base):>+7.2f}p "
              f"{rate:>10.0f} {rate / rpc_rate:>7.2f}x")
if seeds > 1:
    def accuracies(name):
        return [results[(name, s)][0] for s in range(1, seeds + 1)]
    base_mean = statistics.mean(accuracies("pytorch alone"))
    print(f"\ntest accuracy over seeds 1-{seeds}")
    print(f"{'':26} {'mean':>8} {'min':>8} {'max':>8} {'stdev':>7} "
          f"{'mean - alone':>13}")
    for name, _ in runs:
        a = accuracies(name)
        print(f"{name:26} {statistics.mean(a):>8.4f} {min(a):>8.4f} "
              f"{max(a):>8.4f} {100 * statistics.stdev(a):>6.2f}p "
              f"{100 * (statistics.mean(a) - base_mean):>+12.2f}p")
PY
