#!/usr/bin/env bash
# Embedding tables from Python (examples/pytorch_dlrm: a DLRM-style model,
# one table per categorical field, on click logs) on troupe against
# PyTorch alone and PyTorch's RPC parameter server, in one run: the same
# model, MLP start, batch size (256), optimizers (Adam 0.001 on the MLP,
# Adagrad 0.05 on the rows) and epochs everywhere.
# - pytorch alone, 1 and 2 threads: alone.py (nn.EmbeddingBag with sparse
#   gradients), on the batches troupe trains (troupe.epoch_order);
# - troupe async, prefetch off and on: node ps0 (the chief, shard 0), ps1
#   (shard 1) and two Python worker processes w0, w1 (train.py, one
#   thread each), each step timed by bench/dlrm_node_timed.py: the time a
#   worker waits between steps for its lease, values and rows, and the
#   rows it pulled and pushed per second;
# - pytorch rpc ps: bench/pytorch_dlrm_rpc.py, one server holding the
#   tables and the MLP and two worker processes;
# - troupe's click model: the C++ click worker on the same logs and
#   processes (troupe-node; one table for every field, the same dim, MLP
#   and optimizers), whose rows pulled and pushed per second (as the
#   shards counted them) are what the Python workers' are measured
#   against.
# Runs the six in turn, `repeats` rounds (the machine's speed drifts from
# one run to the next: the ratios are of the rounds' medians). Prints each
# run's median samples/s and its range, test log-loss and AUC, and the
# ratios.
# Data: troupe-clicks, 400k training and 40k test logs of 2 numeric and 4
# categorical fields of 100000 Zipf values (seed 3), written once into
# runs/bench-tables.
# Usage: scripts/bench-python-tables.sh [epochs, default 1] [repeats, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
data="$TROUPE_ROOT/runs/bench-tables"
if [[ ! -f "$data/test.tsv" ]]; then
  mkdir -p "$data"
  "$TROUPE_BUILD/apps/troupe-clicks" --out "$data" --train 400000 \
    --test 40000 --numeric 2 --categorical 4 --values 100000 --seed 3
fi
export OPENBLAS_NUM_THREADS=1 # one core per process, as torch's threads
exec /usr/bin/python3 - "${1:-1}" "$data" "${2:-3}" <<'PY'
import json, os, re, statistics, subprocess, sys, time

from benchlib import (free_port, run_json_script, scratch_dir,
                      two_shards_two_workers)

epochs, data, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
example = os.path.abspath("examples/pytorch_dlrm")
timed = os.path.abspath("bench/dlrm_node_timed.py")
work = scratch_dir()
python = "/usr/bin/python3"
rows = {}  # run -> [(samples/s, log-loss, AUC, note), one per round]
round_no = 0


def add(name, rate, loss, auc, note):
    rows.setdefault(name, []).append((rate, loss, auc, note))


def alone(threads):
    r = run_json_script(["alone.py", "--data", data, "--epochs", epochs,
                         "--threads", str(threads)], cwd=example)
    add(f"pytorch alone, {threads} thread(s)", r["samples_per_sec"],
        r["test_log_loss"], r["test_auc"], "")
    return r


def troupe(prefetch):
    name = "prefetch" if prefetch else "no-prefetch"
    run = os.path.join(work, f"{name}-{round_no}")
    subprocess.run([python, "train.py", "prepare", run, "--data", data,
                    "--epochs", epochs] + (["--prefetch"] if prefetch else []),
                   cwd=example, check=True, capture_output=True)
    config = os.path.join(run, "cluster.json")
    logs, procs = {}, {}
    for node in ("ps0", "ps1", "w0", "w1"):
        logs[node] = os.path.join(run, node + ".log")
        procs[node] = subprocess.Popen(
            [python, timed, "node", config, node], cwd=example,
            stdout=open(logs[node], "w"), stderr=subprocess.STDOUT)
        if node == "ps0":
            time.sleep(1)  # the chief makes the cluster key
    for node, p in procs.items():
        if p.wait(timeout=3600) != 0:
            sys.exit(f"{name}: node {node} failed: see {logs[node]}")
    chief = open(logs["ps0"]).read()
    m = re.search(r"test log-loss ([0-9.]+), test AUC ([0-9.]+) \((\d+) "
                  r"examples/s\)", chief)
    workers = [json.loads(l) for n in ("w0", "w1")
               for l in open(logs[n]) if l.startswith("{")]
    wait = sum(w["wait_ms_mean"] for w in workers) / len(workers)
    step = sum(w["step_ms"] for w in workers) / len(workers)
    row_rate = shard_rows_per_sec(chief)
    add(f"troupe async, prefetch {'on' if prefetch else 'off'}",
        float(m.group(3)), float(m.group(1)), float(m.group(2)),
        f"step {step:.2f} ms, waits {wait:.2f} ms between steps, "
        f"{row_rate / 1e6:.2f}M rows/s pulled+pushed (shards)")
    return float(m.group(3)), wait, row_rate


def shard_rows_per_sec(log):
    """Rows pulled and pushed, as the shards counted them at the end, over
    the run's training seconds (its summary row)."""
    moved = sum(int(p) + int(q) for p, q in re.findall(
        r"rows pulled (\d+), pushed (\d+)", log))
    summary = [l for l in log.splitlines()
               if l.split()[:1] and l.split()[0].startswith(("click-", "tables-"))]
    seconds = float(summary[-1].split()[6])
    return moved / seconds


def click_worker():
    """troupe's own click model on the same logs, across the same four
    processes."""
    node = os.path.join(os.environ["TROUPE_BUILD"], "apps", "troupe-node")
    run = os.path.join(work, f"click-{round_no}")
    os.makedirs(run, exist_ok=True)
    nodes = two_shards_two_workers()
    config = os.path.join(run, "click.json")
    with open(config, "w") as f:
        json.dump({
            "name": "click-cpp",
            "model": {"type": "click", "hidden": [64, 32], "seed": 1,
                      "embedding": {"dim": 8}},
            "data": {"format": "click", "dir": data, "train": "train.tsv",
                     "test": "test.tsv", "numeric": 2, "categorical": 4,
                     "vocabulary": 1 << 24},
            "training": {"batch_size": 256, "epochs": int(epochs),
                         "threads": 1, "log_every_steps": 100000,
                         "optimizer": {"type": "adam", "learning_rate": 0.001},
                         "sparse_optimizer": {"type": "adagrad",
                                              "learning_rate": 0.05}},
            "cluster": {"mode": "async", "nodes": nodes}}, f)
    procs = [subprocess.Popen([node, "--config", config, "--node", n["name"]],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for n in nodes[1:]]
    out = subprocess.run([node, "--config", config, "--node", "ps0"],
                         capture_output=True, text=True)
    for p in procs:
        p.wait(timeout=600)
    if out.returncode != 0:
        sys.exit(f"click model failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    scores = re.findall(r"test loss = ([0-9.]+), test AUC = ([0-9.]+)",
                        out.stdout)
    summary = [l for l in out.stdout.splitlines() if l.startswith("click-")]
    rate = float(summary[-1].split()[7])
    row_rate = shard_rows_per_sec(out.stdout)
    add("troupe's C++ click model", rate, float(scores[-1][0]),
        float(scores[-1][1]),
        f"{row_rate / 1e6:.2f}M rows/s pulled+pushed (shards)")
    return row_rate


def rpc():
    r = run_json_script([os.path.abspath("bench/pytorch_dlrm_rpc.py"),
                         "--data", data, "--epochs", epochs, "--port",
                         str(free_port())],
                        cwd=os.path.abspath("bench"))
    add("pytorch rpc ps, 2 workers", r["samples_per_sec"],
        r["test_log_loss"], r["test_auc"], "")
    return r


waits, python_rows, click_rows = {False: [], True: []}, [], []
for round_no in range(repeats):
    alone(1)
    alone(2)
    for prefetch in (False, True):
        _, wait, row_rate = troupe(prefetch)
        waits[prefetch].append(wait)
        if prefetch:
            python_rows.append(row_rate)
    rpc()
    click_rows.append(click_worker())


def median(name):
    return statistics.median(r[0] for r in rows[name])


print(f"{repeats} round(s), samples/s the median (min-max) of the rounds")
print(f"{'run':34} {'samples/s':>10} {'range':>15} {'log-loss':>9} "
      f"{'AUC':>7}")
for name, runs in rows.items():
    rates = [r[0] for r in runs]
    mid = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    print(f"{name:34} {median(name):10.0f} "
          f"{f'{min(rates):.0f}-{max(rates):.0f}':>15} {mid[1]:9.4f} "
          f"{mid[2]:7.4f}  {mid[3]}")
best_alone = max(median("pytorch alone, 1 thread(s)"),
                 median("pytorch alone, 2 thread(s)"))
rpc_rate = median("pytorch rpc ps, 2 workers")
for prefetch in (False, True):
    rate = median(f"troupe async, prefetch {'on' if prefetch else 'off'}")
    print(f"troupe (prefetch {'on' if prefetch else 'off'}) / pytorch alone "
          f"at its best: {rate / best_alone:.2f}x; / pytorch rpc ps: "
          f"{rate / rpc_rate:.2f}x")
print(f"wait between steps: {statistics.median(waits[False]):.2f} ms "
      f"without prefetch, {statistics.median(waits[True]):.2f} ms with it")
print(f"rows pulled+pushed from Python (prefetch on) / the C++ click worker: "
      f"{statistics.median(python_rows) / statistics.median(click_rows):.2f}x")
PY
