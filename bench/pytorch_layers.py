"""PyTorch side of scripts/bench-layers.sh: the layer-list CNN of that
script in PyTorch, trained on Fashion-MNIST as troupe-train trains it:
He-normal weights and zero biases, Adam, batches of 64 in a fresh order
each epoch, every sample once per epoch (the last batch short), the test
set scored after the last epoch. Layer normalization is over each
position's channels, as troupe's (and Keras') layernorm. Prints one JSON
line: test accuracy and loss, and training samples/s (scoring excluded)."""
import argparse
import json
import os
import sys
import time

import pin_threads  # noqa: F401  (before torch)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples",
                                "pytorch_cnn"))
from fashion_cnn import load, score  # noqa: E402


class ChannelNorm(nn.Module):
    """nn.LayerNorm over the channels of NCHW activations."""

    def __init__(self, channels):
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=1e-5)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def make_model():
    # troupe: conv2d 32 k3 s2 same relu, layernorm, conv2d 64 k3 s2 same
    # relu, layernorm, flatten, dropout 0.25, dense 128 relu, dropout 0.25,
    # dense 10.
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, stride=2, padding=1), nn.ReLU(), ChannelNorm(32),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(), ChannelNorm(64),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Dropout(0.25), nn.Linear(128, 10))
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    x, y = load("train")
    test_x, test_y = load("t10k")
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    rng = np.random.RandomState(a.seed)
    start = time.perf_counter()
    for _ in range(a.epochs):
        order = torch.from_numpy(rng.permutation(len(x)))
        model.train()
        for b in range(0, len(x), a.batch):
            i = order[b:b + a.batch]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[i]), y[i]).backward()
            opt.step()
    seconds = time.perf_counter() - start
    accuracy, loss = score(model, test_x, test_y)
    print(json.dumps({"impl": "pytorch", "threads": a.threads,
                      "epochs": a.epochs,
                      "samples_per_sec": round(a.epochs * len(x) / seconds, 1),
                      "test_accuracy": round(accuracy, 4),
                      "test_loss": round(loss, 4)}))


if __name__ == "__main__":
    main()
