#!/usr/bin/env bash
# The PyTorch example with batch normalization (examples/pytorch_cnn,
# prepare --batchnorm: BatchNorm after both convolutions and the hidden
# dense layer) on two Python worker processes against PyTorch alone on the
# same batches (alone.py --batchnorm --order troupe), seed by seed.
# For each troupe run it also loads the final checkpoint into a fresh
# module with load_state_dict(strict=True), scores it in eval mode and
# compares that with the chief's last evaluation: the running statistics
# the shards hold are the ones the chief evaluated with.
# Prints per seed both accuracies and their difference, then the means.
# Usage: scripts/bench-python-batchnorm.sh [epochs, default 3]
#        [seeds, default 3] [mode: sync (default) or async]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-3}" "${2:-3}" "${3:-sync}" <<'PY'
import os, statistics, subprocess, sys, time

import torch

from benchlib import chief_summary, run_json_script, scratch_dir

epochs, seeds, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
example = os.path.abspath("examples/pytorch_cnn")
sys.path.insert(0, example)
import troupe
from fashion_cnn import load, make_model, score

work = scratch_dir()
python = "/usr/bin/python3"
test_x, test_y = load("t10k")


def alone(seed):
    r = run_json_script(["alone.py", "--epochs", str(epochs), "--seed",
                         str(seed), "--order", "troupe", "--batchnorm"],
                        cwd=example)
    return r["test_accuracy"], r["samples_per_sec"]


def on_troupe(seed):
    run = os.path.join(work, f"bn-{mode}-{seed}")
    subprocess.run([python, "train.py", "prepare", run, "--mode", mode,
                    "--epochs", str(epochs), "--seed", str(seed),
                    "--batchnorm"], cwd=example, check=True,
                   capture_output=True)
    config = os.path.join(run, "cluster.json")

    def start(node):
        log = open(os.path.join(run, node + ".log"), "w")
        return subprocess.Popen([python, "train.py", "node", config, node],
                                cwd=example, stdout=log,
                                stderr=subprocess.STDOUT)
    chief = start("ps")
    time.sleep(1)  # the chief makes the cluster key
    workers = [start("w0"), start("w1")]
    code = chief.wait()
    for w in workers:
        w.wait(timeout=60)
    text = open(os.path.join(run, "ps.log")).read()
    if code != 0:
        sys.exit(f"troupe seed {seed} failed:\n{text[-3000:]}")
    rate, accuracy = chief_summary(text)
    ckpt = os.path.join(run, "ckpt")
    newest = max((f for f in os.listdir(ckpt) if f.endswith(".safetensors")),
                 key=lambda f: int(f.split("-")[1].split(".")[0]))
    model = make_model(seed=99, batchnorm=True)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in
                           troupe.read_checkpoint(
                               os.path.join(ckpt, newest)).items()},
                          strict=True)
    loaded = score(model, test_x, test_y)[0]
    once = "samples trained per epoch: " + " ".join(["60000"] * epochs) in text
    return accuracy, rate, loaded, once


rows = []
print(f"BatchNorm CNN, {epochs} epochs, troupe {mode} with two Python "
      "worker processes, against PyTorch alone on the same batches")
print(f"{'seed':>4} {'alone':>7} {'troupe':>7} {'- alone':>8} "
      f"{'ckpt, strict':>12} {'alone/s':>8} {'troupe/s':>8}  every sample "
      "once")
for seed in range(1, seeds + 1):
    a, a_rate = alone(seed)
    t, t_rate, loaded, once = on_troupe(seed)
    rows.append((a, t))
    print(f"{seed:>4} {a:7.4f} {t:7.4f} {100 * (t - a):+7.2f}pt "
          f"{loaded:12.4f} {a_rate:8.0f} {t_rate:8.0f}  {once}", flush=True)
mean_a = statistics.mean(r[0] for r in rows)
mean_t = statistics.mean(r[1] for r in rows)
print(f"mean {mean_a:7.4f} {mean_t:7.4f} {100 * (mean_t - mean_a):+7.2f}pt")
PY
