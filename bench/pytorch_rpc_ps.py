"""PyTorch's RPC parameter server: the reference for troupe's async training
across processes (scripts/bench-rpc-ps.sh runs both in one go).

One server process and N worker processes on 127.0.0.1, talking through
torch.distributed.rpc (TensorPipe), in the pattern of PyTorch's
parameter-server tutorial: each step a worker pulls the parameters
(rpc_sync), computes the gradient of its batch, and pushes it (rpc_sync);
the server applies every push with SGD under a lock as it arrives (async,
no staleness rule). Workers share each epoch's shuffled batches round-robin
(every sample once per epoch, as troupe's default data partition). The
model is an MLP with ReLU and He-normal weights and zero biases, as troupe's
"init": "he". Images scaled to [0, 1]. The server evaluates on the test set
at the end.

--model cnn trains the PyTorch example's CNN with dropout instead
(examples/pytorch_cnn/fashion_cnn.py: its model, initial values and data;
scripts/bench-python-cnn.sh), dropout on in the workers and off in the
server's evaluation.

Prints one JSON line: samples/s (trained samples over the time from the
first pull to the last push, as the server saw them), test accuracy, steps.

  /usr/bin/python3 bench/pytorch_rpc_ps.py --data DIR [--workers 2]
      [--epochs 3] [--batch 100] [--hidden 100] [--lr 0.1] [--port P]
      [--model mlp|cnn]
"""
import argparse
import gzip
import json
import os
import struct

import numpy as np
import rpc_group
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(directory, split):
    def path(kind):
        base = os.path.join(directory, f"{split}-{kind}")
        return base if os.path.exists(base) else base + ".gz"
    images = read_idx(path("images-idx3-ubyte"))
    labels = read_idx(path("labels-idx1-ubyte"))
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32)
                         / 255.0)
    return x, torch.from_numpy(labels.astype(np.int64))


def make_model(hidden, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 10))
    for layer in (model[0], model[2]):
        torch.nn.init.normal_(layer.weight, 0.0, (2.0 / layer.in_features) ** 0.5)
        torch.nn.init.zeros_(layer.bias)
    return model


class Server(rpc_group.ServerCounts):
    def __init__(self, model, lr):
        super().__init__()
        self.params = [p.detach() for p in model.parameters()]
        self.model = model
        self.lr = lr


server = None  # set in the server process


def pull():
    with server.lock:
        server.pulled()
        return [p.clone() for p in server.params]


def push(grads):
    with server.lock:
        for p, g in zip(server.params, grads):
            p.add_(g, alpha=-server.lr)
        server.pushed()


def example_cnn():
    """The PyTorch example's module (examples/pytorch_cnn/fashion_cnn.py)."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "examples", "pytorch_cnn"))
    import fashion_cnn
    return fashion_cnn


def model_of(a):
    if a.model == "cnn":
        return example_cnn().make_model(a.seed)
    return make_model(a.hidden, a.seed)


def data_of(a, split):
    if a.model == "cnn":
        return example_cnn().load(split, a.data)
    return load(a.data, split)


def work(rank, a):
    x, y = data_of(a, "train")
    model = model_of(a)
    loss_fn = torch.nn.CrossEntropyLoss()
    n_batches = len(x) // a.batch
    for epoch in range(a.epochs):
        order = torch.from_numpy(
            np.random.RandomState(a.seed + epoch).permutation(len(x)))
        for b in range(rank - 1, n_batches, a.workers):
            idx = order[b * a.batch:(b + 1) * a.batch]
            for p, v in zip(model.parameters(), rpc.rpc_sync("ps", pull)):
                p.data = v
            loss = loss_fn(model(x[idx]), y[idx])
            grads = torch.autograd.grad(loss, list(model.parameters()))
            rpc.rpc_sync("ps", push, args=([g.detach() for g in grads],))


def run(rank, a):
    global server
    options = rpc_group.options(a.port)
    if rank == 0:
        server = Server(model_of(a), a.lr)
        rpc_group.join(rank, a.workers, options)
        rpc.shutdown()  # waits for every worker to finish
        xt, yt = data_of(a, "t10k")
        server.model.eval()
        with torch.no_grad():
            acc = (server.model(xt).argmax(1) == yt).float().mean().item()
        print(json.dumps({
            "impl": "pytorch-rpc-ps", "workers": a.workers,
            "epochs": a.epochs, "steps": server.pushes,
            "samples_per_sec": server.samples_per_sec(a.batch),
            "test_accuracy": round(acc, 4)}), flush=True)
    else:
        rpc_group.join(rank, a.workers, options)
        work(rank, a)
        rpc.shutdown()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True, help="folder of the IDX files")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--hidden", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    a = p.parse_args()
    mp.spawn(run, args=(a,), nprocs=a.workers + 1, join=True)


if __name__ == "__main__":
    main()
