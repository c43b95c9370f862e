#!/usr/bin/env bash
# A model written as a layer list, side by side with the same model in
# PyTorch, in one run: a CNN with stride-2 convolutions, layer
# normalization and dropout on Fashion-MNIST (conv2d 32 3x3/2 relu,
# layernorm, conv2d 64 3x3/2 relu, layernorm, flatten, dropout 0.25, dense
# 128 relu, dropout 0.25, dense 10; Adam 0.001, batch 64), trained by
# troupe-train and by bench/pytorch_layers.py for the same epochs on 1 and
# on 2 threads. Prints each run's test accuracy and training samples/s,
# and troupe's over PyTorch's.
# Usage: scripts/bench-layers.sh [epochs, default 3] [seeds, default 1]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-3}" "${2:-1}" "$TROUPE_BUILD" <<'PY'
import re, sys

from benchlib import (means_over_seeds, run_json_script, scratch_dir,
                      train_adam_on_troupe)

epochs, seeds, build = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
work = scratch_dir()
layers = [
    {"type": "conv2d", "filters": 32, "kernel": 3, "stride": 2,
     "activation": "relu"},
    {"type": "layernorm"},
    {"type": "conv2d", "filters": 64, "kernel": 3, "stride": 2,
     "activation": "relu"},
    {"type": "layernorm"},
    {"type": "flatten"},
    {"type": "dropout", "rate": 0.25},
    {"type": "dense", "units": 128, "activation": "relu"},
    {"type": "dropout", "rate": 0.25},
    {"type": "dense", "units": 10}]


def troupe(threads, seed):
    out = train_adam_on_troupe(
        build, work, "layers-cnn",
        {"layers": layers, "init": "he", "seed": seed},
        {"format": "idx", "dir": "/usr/share/datasets/fashion-mnist"},
        epochs, seed, threads)
    done = re.search(r"done: .* ([\d.]+) examples/sec, test accuracy = "
                     r"([\d.]+)", out)
    return float(done.group(2)), float(done.group(1))


def pytorch(threads, seed):
    r = run_json_script(["bench/pytorch_layers.py", "--epochs", str(epochs),
                         "--threads", str(threads), "--seed", str(seed)])
    return r["test_accuracy"], r["samples_per_sec"]


def say(seed, threads, name, result):
    acc, rate = result
    print(f"seed {seed}, {threads} thread(s), {name}: test accuracy "
          f"{acc:.4f}, {rate:.0f} samples/s", flush=True)


mean = means_over_seeds({"troupe": troupe, "pytorch": pytorch}, seeds,
                        (1, 2), say)
print(f"\n{epochs} epochs, Adam 0.001, batch 64; means over seeds 1-{seeds}")
print(f"{'threads':>7} {'troupe acc':>10} {'pytorch acc':>11} {'points':>7} "
      f"{'troupe/s':>9} {'pytorch/s':>9} {'ratio':>6}")
for threads in (1, 2):
    (ta, tr), (pa, pr) = mean[("troupe", threads)], mean[("pytorch", threads)]
    print(f"{threads:>7} {ta:>10.4f} {pa:>11.4f} {100 * (ta - pa):>+6.2f}p "
          f"{tr:>9.0f} {pr:>9.0f} {tr / pr:>5.2f}x")
PY
