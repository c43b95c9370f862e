"""Logistic (softmax) regression in NumPy alone on Fashion-MNIST, trained
on troupe's parameter servers by two Python worker processes. No PyTorch:
the gradient is written by hand.

    python3 train.py prepare run                   # run/cluster.json
    python3 train.py node run/cluster.json ps &    # chief, shard, evaluation
    python3 train.py node run/cluster.json w0 &
    python3 train.py node run/cluster.json w1

or all of it in this process (chief, shard and two workers as threads;
its checkpoints in run/ckpt-embedded, the cluster's in run/ckpt):

    python3 train.py embedded run [--fresh]

Needs PYTHONPATH to hold troupe's module (build/python) and Debian's
python3-numpy."""

import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np

import troupe

DATA = "/usr/share/datasets/fashion-mnist"
FEATURES, CLASSES = 28 * 28, 10


def load(split):
    def read(kind):
        with gzip.open(os.path.join(DATA, "%s-%s-idx%d-ubyte.gz" % (
                split, kind, 3 if kind == "images" else 1)), "rb") as f:
            data = f.read()
        dims = struct.unpack(">" + "I" * data[3], data[4:4 + 4 * data[3]])
        return np.frombuffer(data, np.uint8,
                             offset=4 + 4 * data[3]).reshape(dims)
    x = read("images").reshape(-1, FEATURES).astype(np.float32) / 255.0
    return x, read("labels").astype(np.int64)


def softmax_loss(params, x, y):
    """Mean cross-entropy's gradients, the loss sum and the hits."""
    z = x @ params["weight"].T + params["bias"]
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(len(y)), y] + 1e-12).sum()
    hits = int((p.argmax(1) == y).sum())
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    return ({"weight": (p.T @ x).astype(np.float32),
             "bias": p.sum(axis=0).astype(np.float32)}, float(loss), hits)


def prepare(a):
    os.makedirs(a.dir, exist_ok=True)
    d = os.path.abspath(a.dir)
    params = os.path.join(d, "model.safetensors")
    troupe.write_parameters(params, {
        "weight": np.zeros((CLASSES, FEATURES), np.float32),
        "bias": np.zeros(CLASSES, np.float32)})

    # Ports free now and outside the range the kernel draws outgoing
    # connections' ports from, so that none is taken before its node binds.
    ports = iter(troupe.local_ports(3))
    config = {
        "name": "fashion-logistic",
        "model": {"type": "external", "parameters": params},
        "data": {"format": "external", "train_samples": 60000},
        "training": {"batch_size": 100, "epochs": a.epochs,
                     "optimizer": {"type": "sgd", "learning_rate": 0.1},
                     "checkpoint": {"dir": os.path.join(d, "ckpt")},
                     "log_every_steps": 200},
        "cluster": {"mode": a.mode, "workers": 2, "shards": 1}}
    # The embedded run and the cluster are two runs of their own: each
    # keeps its checkpoints in a folder of its own, so neither resumes
    # (or refuses) the other's.
    config["training"]["checkpoint"]["dir"] = os.path.join(d, "ckpt-embedded")
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump(config, f, indent=1)
    config["training"]["checkpoint"]["dir"] = os.path.join(d, "ckpt")
    config["cluster"] = {"mode": a.mode, "nodes": [
        {"name": n, "host": "127.0.0.1", "port": next(ports), role: 1}
        for n, role in (("ps", "shards"), ("w0", "workers"),
                        ("w1", "workers"))]}
    with open(os.path.join(d, "cluster.json"), "w") as f:
        json.dump(config, f, indent=1)


def functions(train):
    """The step (on the training set) and the evaluation (on the test
    set) that troupe calls."""
    x, y = load("train") if train else (None, None)
    test_x, test_y = load("t10k")

    def step(params, samples):
        return softmax_loss(params, x[samples], y[samples])

    def evaluate(params):
        _, loss, hits = softmax_loss(params, test_x, test_y)
        return hits / len(test_y), loss / len(test_y), len(test_y)
    return step, evaluate


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("dir")
    q.add_argument("--mode", default="async", choices=["async", "sync"])
    q.add_argument("--epochs", type=int, default=5)
    q = sub.add_parser("node")
    q.add_argument("config")
    q.add_argument("node")
    q = sub.add_parser("embedded")
    q.add_argument("dir")
    q.add_argument("--fresh", action="store_true",
                   help="start over instead of resuming run/ckpt-embedded")
    a = p.parse_args()
    if a.what == "prepare":
        return prepare(a)
    if a.what == "embedded":
        step, evaluate = functions(train=True)
        print(troupe.train(os.path.join(a.dir, "run.json"), step,
                           evaluate=evaluate, fresh=a.fresh))
        return
    step, evaluate = functions(train=a.node != "ps")
    key = os.path.join(os.path.dirname(os.path.abspath(a.config)),
                       "cluster.key")
    try:
        troupe.run_node(a.config, a.node, step,
                        evaluate=evaluate if a.node == "ps" else None,
                        key=key)
    except troupe.Error as e:  # e.g. troupe.ConfigError, troupe.ClusterError
        print(f"train.py: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
