#!/usr/bin/env bash
# The PyTorch example's CNN (examples/pytorch_cnn: SGD 0.05, batch 64 a
# worker, dropout) as Python worker processes are added, in one run: PyTorch
# alone (alone.py, one process), troupe with one worker, then for each
# count in COUNTS troupe async (stale_lr divide, the default), async with
# stale_lr gap and stale_lookahead 1, and sync with
# every worker taking a whole batch of 64 at the rate given for one, by each
# sync_lr rule of RULES (the example itself splits a sync batch among its
# workers instead), beside PyTorch alone with the one batch that the linear
# rule makes of k workers' (64k samples at k times the rate): what no
# scaling of the rate gets past. Node ps holds the chief and the shard;
# each worker is a Python process of one thread (train.py node). Prints
# each run's test accuracy and its points from troupe's one worker, and
# samples/s.
# Usage: scripts/bench-python-workers.sh [epochs, default 2]
#          [worker counts, default "4 8 16"] [sync rules, default "linear sqrt"]
#          [cluster keys of every troupe run as JSON, default {}]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-2}" "${2:-4 8 16}" "${3:-linear sqrt}" "${4:-{\}}" <<'PY'
import json, os, subprocess, sys, time

from benchlib import chief_summary, run_json_script, scratch_dir

epochs, counts = int(sys.argv[1]), [int(w) for w in sys.argv[2].split()]
rules = sys.argv[3].split()
extra = json.loads(sys.argv[4])
example = os.path.abspath("examples/pytorch_cnn")
work = scratch_dir()
python = "/usr/bin/python3"


def troupe(mode, workers, rule=None):
    run = os.path.join(work, f"{mode}-{workers}-{rule}")
    subprocess.run([python, "train.py", "prepare", run, "--mode", mode,
                    "--epochs", str(epochs), "--workers", str(workers)],
                   cwd=example, check=True, capture_output=True)
    config = os.path.join(run, "cluster.json")
    with open(config) as f:
        c = json.load(f)
    c["training"]["batch_size"] = 64  # a whole batch for every worker
    c["training"]["eval_every_steps"] = 10**9
    c["cluster"].pop("sync_lr", None)
    c["cluster"].update(extra)
    if mode == "async" and rule == "gap+lookahead":
        c["cluster"].update({"stale_lr": "gap", "stale_lookahead": 1})
    elif rule:
        c["cluster"]["sync_lr"] = rule
    with open(config, "w") as f:
        json.dump(c, f)

    def start(node):
        log = open(os.path.join(run, node + ".log"), "w")
        return subprocess.Popen([python, "train.py", "node", config, node],
                                cwd=example, stdout=log,
                                stderr=subprocess.STDOUT)
    chief = start("ps")
    time.sleep(1)  # the chief makes the cluster key
    procs = [start(f"w{i}") for i in range(workers)]
    code = chief.wait()
    for p in procs:
        p.wait(timeout=120)
    text = open(os.path.join(run, "ps.log")).read()
    if code != 0:
        sys.exit(f"troupe {mode} {workers} failed:\n{text[-3000:]}")
    rate, accuracy = chief_summary(text)
    return accuracy, rate


alone = run_json_script(["alone.py", "--epochs", str(epochs), "--order",
                         "troupe"], cwd=example)
one, one_rate = troupe("async", 1)
print(f"{epochs} epochs, SGD 0.05, batch 64 a worker; PyTorch alone "
      f"{alone['test_accuracy']:.4f} ({alone['samples_per_sec']:.0f} samples/s), "
      f"troupe 1 worker {one:.4f} ({one_rate:.0f} samples/s)", flush=True)
columns = [("async", None), ("async", "gap+lookahead")] + [
    ("sync", r) for r in rules]
print(f"{'workers':>7} {'PyTorch, 64k at 0.05k':>22} "
      + " ".join(f"{m + ' ' + (r or 'divide'):>22}" for m, r in columns),
      flush=True)
for w in counts:
    big = run_json_script(["alone.py", "--epochs", str(epochs), "--order",
                           "troupe", "--batch", str(64 * w), "--lr",
                           str(0.05 * w)], cwd=example)
    acc = big["test_accuracy"]
    cells = [f"{acc:.4f} ({100 * (acc - one):+5.1f}) "
             f"{big['samples_per_sec']:>6.0f}/s"]
    for mode, rule in columns:
        acc, rate = troupe(mode, w, rule)
        cells.append(f"{acc:.4f} ({100 * (acc - one):+5.1f}) {rate:>6.0f}/s")
    print(f"{w:>7} " + " ".join(f"{c:>22}" for c in cells), flush=True)
PY
