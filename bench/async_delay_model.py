#!/usr/bin/env python3
"""Async training with a fixed staleness, without troupe: the MLP
784-256-128-10 of config/local.json (He init, ReLU, softmax, Adam with
TF's defaults, batch 128) on Fashion-MNIST, where every gradient is
computed on the parameters of `delay` updates ago, as a shard sees pushes
with n workers. It shows whether an accuracy gap under asynchrony comes
from the optimizer or from the runtime.

  python3 bench/async_delay_model.py DELAY LR [RULE] [BATCH] [EPOCHS] [LAMBDA]
                                     [WARMUP]

RULE is none, or parts joined by "+" (e.g. gap+look, sqrt+gap+look):
divide scales each update's learning rate by 1 / max(1, delay), as
cluster.stale_lr "divide" does (sqrt: by 1 / sqrt(delay)); gap divides
each coordinate's step by its gap, as stale_lr "gap" does; dc corrects the gradient to first order with
lambda LAMBDA (default 2), as cluster.delay_compensation does
(runtime/params/stale_compensation.hpp has both); look takes each gradient
on the values carried on along their last update DELAY more times, w +
DELAY (w - w_before), as cluster.stale_lookahead 1 does (with gap or dc,
the gap or the correction measured from that point). WARMUP raises the
learning rate linearly over that many first updates (default 0: none).
Needs python3-numpy.
"""
import gzip
import sys

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist/"


def idx(path):
    d = gzip.open(DATA + path).read()
    dims = [int.from_bytes(d[4 + 4 * i:8 + 4 * i], "big") for i in range(d[3])]
    return np.frombuffer(d, np.uint8, offset=4 + 4 * d[3]).reshape(dims)


def forward_backward(p, x, y):
    h = [x]
    for i in range(3):
        z = h[-1] @ p[2 * i] + p[2 * i + 1]
        h.append(np.maximum(z, 0) if i < 2 else z)
    z = h[-1] - h[-1].max(1, keepdims=True)
    e = np.exp(z)
    d = e / e.sum(1, keepdims=True)
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    g = [None] * 6
    for i in (2, 1, 0):
        g[2 * i], g[2 * i + 1] = h[i].T @ d, d.sum(0)
        if i > 0:
            d = (d @ p[2 * i].T) * (h[i] > 0)
    return g


def main():
    delay, lr = int(sys.argv[1]), float(sys.argv[2])
    rule = sys.argv[3] if len(sys.argv) > 3 else "none"
    parts = set(rule.split("+"))
    if not parts <= {"none", "divide", "sqrt", "gap", "dc", "look"}:
        sys.exit("RULE: none, or parts of divide, sqrt, gap, dc and look "
                 "joined by +, found " + rule)
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    epochs = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    lam = float(sys.argv[6]) if len(sys.argv) > 6 else 2.0
    warmup = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    x = idx("train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    y = idx("train-labels-idx1-ubyte.gz").astype(np.int64)
    xt = idx("t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    yt = idx("t10k-labels-idx1-ubyte.gz").astype(np.int64)
    rng = np.random.default_rng(1)
    sizes = [784, 256, 128, 10]
    p = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        p += [rng.normal(0, np.sqrt(2 / a), (a, b)).astype(np.float32),
              np.zeros(b, np.float32)]
    m = [np.zeros_like(t) for t in p]
    v = [np.zeros_like(t) for t in p]
    step_mean = [np.zeros_like(t) for t in p]  # gap's C
    square_mean = [np.zeros_like(t) for t in p]  # dc's ms
    last_step = [np.zeros_like(t) for t in p]  # look's w - w_before
    history = [[t.copy() for t in p]]  # what the last delay + 1 pulls got
    scale = 1.0
    if "divide" in parts:
        scale = 1.0 / max(1, delay)
    elif "sqrt" in parts:
        scale = 1.0 / np.sqrt(max(1, delay))
    look = "look" in parts
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for s in range(0, len(x), batch):
            rows = order[s:s + batch]
            stale = history[max(0, len(history) - 1 - delay)]
            g = forward_backward(stale, x[rows], y[rows])
            t = step + 1
            alpha = lr * scale * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
            if warmup:
                alpha *= min(1.0, t / warmup)
            for i in range(6):
                gi, scale_i, moved = g[i], 1.0, p[i] - stale[i]
                if "dc" in parts:
                    square_mean[i] = 0.95 * square_mean[i] + 0.05 * gi * gi
                    gi = gi + lam * gi * gi / np.sqrt(square_mean[i] + 1e-7) * moved
                if "gap" in parts and step > 0:
                    gap = np.abs(moved) / np.maximum(step_mean[i], 1e-30)
                    scale_i = 1.0 / np.maximum(1.0, gap)
                m[i] = 0.9 * m[i] + 0.1 * gi
                v[i] = 0.999 * v[i] + 0.001 * gi ** 2
                change = alpha * scale_i * m[i] / (np.sqrt(v[i]) + 1e-8)
                p[i] -= change
                last_step[i] = -change
                step_mean[i] = (np.abs(change) if step == 0
                                else 0.99 * step_mean[i] + 0.01 * np.abs(change))
            step += 1
            pulled = [t + delay * s if look else t.copy()
                      for t, s in zip(p, last_step)]
            history = (history + [pulled])[-(delay + 1):]
    h = xt
    for i in range(3):
        h = h @ p[2 * i] + p[2 * i + 1]
        if i < 2:
            h = np.maximum(h, 0)
    print(f"delay {delay}, lr {lr}, {rule}, batch {batch}, {epochs} epochs"
          f"{f', warm-up {warmup}' if warmup else ''}: "
          f"test accuracy {(h.argmax(1) == yt).mean():.4f}")


main()
