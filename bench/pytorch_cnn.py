"""PyTorch reference for the CNN rows of apps/bench/bench_cpu_training.cpp: the
model of config/cnn.json (conv 5x5 1->32 ReLU, max-pool 2, conv 5x5 32->64
ReLU, max-pool 2, dense 3136->10; same padding), Adam 0.001, the same loop
(forward, cross-entropy, backward, optimizer step) over a pool of pre-made
random batches. PyTorch runs its convolutions through oneDNN. Prints JSON
lines in the format of bench_cpu_training --json."""
import argparse
import json

import torch

from pytorch_mlp import samples_per_sec


def make_model():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(3136, 10))


def measure(batch, threads, seconds):
    torch.set_num_threads(threads)
    torch.manual_seed(42)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    return samples_per_sec(model, opt, torch.rand(16, batch, 1, 28, 28),
                           seconds, chunk=5)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--kernels", default="?")
    a = p.parse_args()
    for t in a.threads:
        sps = measure(a.batch, t, a.seconds)
        print(json.dumps({"impl": "pytorch", "kernels": a.kernels,
                          "model": "cnn 32-64 relu", "batch": a.batch,
                          "threads": t, "samples_per_sec": round(sps, 1)}),
              flush=True)


if __name__ == "__main__":
    main()
