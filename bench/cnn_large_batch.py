#!/usr/bin/env python3
"""The PyTorch example's CNN (examples/pytorch_cnn, dropout 0.25) trained
by PyTorch alone in one thread with one large batch per update, as a sync
run of k workers with sync_lr "linear" makes of their batches: plain SGD
at RATE, optionally reached over the first WARMUP updates (as
cluster.sync_warmup), or LARS (each tensor's step scaled by ETA times its
norm over its gradient's; You, Gitman and Ginsburg 2017). It shows what
the batch itself allows at a fixed number of epochs, whatever the runtime.

  python3 bench/cnn_large_batch.py [--batch 1024] [--lr 0.8] [--warmup 30]
                                   [--rule sgd|lars] [--eta 0.001]
                                   [--epochs 2]

Prints one JSON line with the test accuracy. Needs python3-torch."""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "examples", "pytorch_cnn"))
from fashion_cnn import load, make_model, score  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--rule", choices=["sgd", "lars"], default="sgd")
    p.add_argument("--eta", type=float, default=0.001)
    p.add_argument("--epochs", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(1)
    x, y = load("train")
    test_x, test_y = load("t10k")
    model = make_model(1, False, 0.25)
    params = list(model.parameters())
    updates = 0
    for epoch in range(a.epochs):
        order = torch.from_numpy(np.random.RandomState(epoch).permutation(
            len(x)))
        model.train()
        for b in range(0, len(x), a.batch):
            i = order[b:b + a.batch]
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(x[i]), y[i]).backward()
            scale = min(1.0, (updates + 1) / a.warmup) if a.warmup else 1.0
            with torch.no_grad():
                for w in params:
                    ratio = 1.0
                    if a.rule == "lars":
                        wn, gn = w.norm().item(), w.grad.norm().item()
                        ratio = a.eta * wn / gn if wn > 0 and gn > 0 else 1.0
                    w.add_(w.grad, alpha=-a.lr * scale * ratio)
            updates += 1
    accuracy, loss = score(model, test_x, test_y)
    print(json.dumps({**vars(a), "updates": updates,
                      "test_accuracy": round(accuracy, 4),
                      "test_loss": round(loss, 4)}))


if __name__ == "__main__":
    main()
