"""PyTorch side of scripts/bench-regression.sh: the same model (one dense
layer from the features to the targets, no activation) trained on the same
.npy files as troupe-train trains it: Glorot-uniform weights and zero
biases, Adam, mean squared error averaged over every target of the batch,
batches of 64 in a fresh order each epoch, every sample once per epoch
(the last batch short), the test set scored after the last epoch. Prints
one JSON line: test mse and training samples/s (scoring excluded)."""
import argparse
import json
import os
import time

import pin_threads  # noqa: F401  (before torch)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)

    def load(name):
        return torch.from_numpy(np.load(os.path.join(a.dir, name)))

    x, y = load("x_train.npy"), load("y_train.npy")
    test_x, test_y = load("x_test.npy"), load("y_test.npy")
    model = nn.Linear(x.shape[1], y.shape[1])
    nn.init.xavier_uniform_(model.weight)
    nn.init.zeros_(model.bias)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    rng = np.random.RandomState(a.seed)
    start = time.perf_counter()
    for _ in range(a.epochs):
        order = torch.from_numpy(rng.permutation(len(x)))
        for b in range(0, len(x), a.batch):
            i = order[b:b + a.batch]
            opt.zero_grad()
            nn.functional.mse_loss(model(x[i]), y[i]).backward()
            opt.step()
    seconds = time.perf_counter() - start
    with torch.no_grad():
        mse = nn.functional.mse_loss(model(test_x), test_y).item()
    print(json.dumps({"impl": "pytorch", "threads": a.threads,
                      "epochs": a.epochs,
                      "samples_per_sec": round(a.epochs * len(x) / seconds, 1),
                      "test_mse": mse}))


if __name__ == "__main__":
    main()
