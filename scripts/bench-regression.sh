#!/usr/bin/env bash
# A regression side by side with the same model in PyTorch, in one run:
# 64 Gaussian features, 4 targets y = x W + b + noise (standard deviation
# 0.1, so the best possible mean squared error is 0.01), 50000 training and
# 10000 test samples written once as .npy files; one dense layer (no
# activation) trained with mean squared error, Adam 0.001, batch 64, by
# troupe-train and by bench/pytorch_regression.py for the same epochs on 1
# and on 2 threads. Prints each run's test mse over the noise floor (the
# test set's own noise, mean of its squares) and training samples/s, and
# troupe's over PyTorch's.
# Usage: scripts/bench-regression.sh [epochs, default 5] [seeds, default 1]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-5}" "${2:-1}" "$TROUPE_BUILD" <<'PY'
import os, re, sys

import numpy as np

from benchlib import (means_over_seeds, run_json_script, scratch_dir,
                      train_adam_on_troupe)

epochs, seeds, build = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
work = scratch_dir()
features, targets = 64, 4
truth = np.random.RandomState(0)
w = truth.normal(size=(features, targets)) / np.sqrt(features)
b = truth.normal(size=targets)
floor = None
for name, n, seed in (("train", 50000, 1), ("test", 10000, 2)):
    r = np.random.RandomState(seed)
    x = r.normal(size=(n, features)).astype(np.float32)
    noise = 0.1 * r.normal(size=(n, targets))
    np.save(os.path.join(work, f"x_{name}.npy"), x)
    np.save(os.path.join(work, f"y_{name}.npy"),
            (x @ w + b + noise).astype(np.float32))
    if name == "test":
        floor = float(np.mean(noise ** 2))


def troupe(threads, seed):
    out = train_adam_on_troupe(
        build, work, "regression",
        {"layers": [{"type": "dense", "units": targets}],
         "loss": "mean_squared_error", "init": "xavier", "seed": seed},
        {"format": "npy", "dir": work, "train": "x_train.npy",
         "train_labels": "y_train.npy", "test": "x_test.npy",
         "test_labels": "y_test.npy"},
        epochs, seed, threads)
    done = re.search(r"done: .* ([\d.]+) examples/sec", out)
    mse = re.findall(r"test mse = ([\d.e+-]+),", out)[-1]
    return float(mse), float(done.group(1))


def pytorch(threads, seed):
    r = run_json_script(["bench/pytorch_regression.py", "--dir", work,
                         "--epochs", str(epochs), "--threads", str(threads),
                         "--seed", str(seed)])
    return r["test_mse"], r["samples_per_sec"]


def say(seed, threads, name, result):
    mse, rate = result
    print(f"seed {seed}, {threads} thread(s), {name}: test mse "
          f"{mse:.5f} ({mse / floor:.3f} of the floor), "
          f"{rate:.0f} samples/s", flush=True)


print(f"noise floor (the test set's own noise): mse {floor:.5f}", flush=True)
mean = means_over_seeds({"troupe": troupe, "pytorch": pytorch}, seeds,
                        (1, 2), say)
print(f"\n{epochs} epochs, Adam 0.001, batch 64; means over seeds 1-{seeds}")
print(f"{'threads':>7} {'troupe mse/floor':>16} {'pytorch mse/floor':>17} "
      f"{'troupe/s':>9} {'pytorch/s':>9} {'ratio':>6}")
for threads in (1, 2):
    (tm, tr), (pm, pr) = mean[("troupe", threads)], mean[("pytorch", threads)]
    tm, pm = tm / floor, pm / floor
    print(f"{threads:>7} {tm:>16.4f} {pm:>17.4f} {tr:>9.0f} {pr:>9.0f} "
          f"{tr / pr:>5.2f}x")
PY
