"""What the PyTorch references that train as troupe-train trains share
(bench/pytorch_layers.py, bench/pytorch_regression.py): their options,
torch's threads and seed, the training loop (Adam, batches of --batch in a
fresh order each epoch, every sample once per epoch, the last batch
short) and the JSON line they print. It loads torch: import pin_threads
first."""
import argparse
import json
import time

import numpy as np
import torch


def option_parser(epochs):
    """A parser of the options every reference takes: --epochs (default
    `epochs`), --threads, --batch, --lr (Adam's) and --seed; a reference
    adds its own."""
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=1)
    return p


def set_up_torch(a):
    """--threads compute threads, one inter-op thread, torch seeded with
    --seed (the model's initial values, dropout): before the model is
    made."""
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)


def train(model, loss_fn, x, y, a):
    """Trains `model` on (x, y) with Adam for --epochs epochs of batches
    of --batch, each epoch in a fresh order drawn from --seed. Returns the
    seconds it took."""
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    rng = np.random.RandomState(a.seed)
    start = time.perf_counter()
    for _ in range(a.epochs):
        order = torch.from_numpy(rng.permutation(len(x)))
        model.train()
        for b in range(0, len(x), a.batch):
            i = order[b:b + a.batch]
            opt.zero_grad()
            loss_fn(model(x[i]), y[i]).backward()
            opt.step()
    return time.perf_counter() - start


def print_result(a, samples, seconds, **scores):
    """The JSON line the benchmark scripts read: the run's options, its
    training samples/s (`samples` a epoch) and its test `scores`."""
    print(json.dumps({"impl": "pytorch", "threads": a.threads,
                      "epochs": a.epochs,
                      "samples_per_sec": round(a.epochs * samples / seconds, 1),
                      **scores}))
