"""Fashion-MNIST on troupe's parameter servers with a PyTorch CNN
(fashion_cnn.py) and two Python worker processes.

    # the run's folder: the model's initial parameters and a cluster file
    # (node ps: the chief and the shard; w0, w1: one worker each)
    python3 train.py prepare run --mode async --epochs 3 [--batchnorm]
    # one process per node, here all on this machine
    python3 train.py node run/cluster.json ps &
    python3 train.py node run/cluster.json w0 &
    python3 train.py node run/cluster.json w1

Node ps evaluates on the test set each epoch and ends with a summary; the
checkpoints in run/ckpt load back with load_state_dict(strict=True),
BatchNorm's running statistics included. Needs PYTHONPATH to hold
troupe's module (build/python) and Debian's python3-torch."""

import argparse
import json
import os
import sys
import zlib

import torch

import troupe
from fashion_cnn import add_run_options, load, make_model, score


def prepare(a):
    os.makedirs(a.dir, exist_ok=True)
    d = os.path.abspath(a.dir)
    params = os.path.join(d, "model.safetensors")
    shape = {"batchnorm": a.batchnorm, "dropout": a.dropout}
    # The module itself: its buffers (BatchNorm's running statistics) are
    # written as buffers, which the steps set instead of the optimizer.
    troupe.write_parameters(params, make_model(a.seed, **shape))
    with open(os.path.join(d, "model.json"), "w") as f:
        json.dump(shape, f)

    # Ports free now and outside the range the kernel draws outgoing
    # connections' ports from, so that none is taken before its node binds.
    ports = iter(troupe.local_ports(1 + a.workers))
    # In sync mode the workers' gradients are averaged: each worker takes
    # its share of the batch, so a step sees as many samples as PyTorch
    # alone, at PyTorch's learning rate (sync_lr none: troupe's default
    # scales the rate by sqrt(workers) for workers that each take a whole
    # batch).
    batch = a.batch // a.workers if a.mode == "sync" else a.batch
    config = {
        "name": "fashion-cnn-" + a.mode,
        "model": {"type": "external", "parameters": params},
        "data": {"format": "external", "train_samples": a.samples},
        "training": {"batch_size": batch, "epochs": a.epochs, "seed": a.seed,
                     "optimizer": {"type": "sgd", "learning_rate": a.lr},
                     "checkpoint": {"dir": os.path.join(d, "ckpt")},
                     "log_every_steps": 200},
        "cluster": {"mode": a.mode, "sync_lr": "none", "node_timeout_s": 60,
                    "nodes": [
            {"name": "ps", "host": "127.0.0.1", "port": next(ports),
             "shards": 1}]
            + [{"name": "w%d" % i, "host": "127.0.0.1", "port": next(ports),
                "workers": 1} for i in range(a.workers)]}}
    with open(os.path.join(d, "cluster.json"), "w") as f:
        json.dump(config, f, indent=1)
    print(os.path.join(d, "cluster.json"))


def node(a):
    torch.set_num_threads(1)  # one core per worker process
    with open(os.path.join(os.path.dirname(a.config), "model.json")) as f:
        model = make_model(**json.load(f))
    # Each process its own dropout masks: make_model() seeds torch's
    # generator alike everywhere, and two workers drawing the same masks
    # would drop the same units in both halves of a sync step.
    with open(a.config) as f:
        seed = json.load(f)["training"].get("seed", 1)
    torch.manual_seed(seed * 1000 + zlib.crc32(a.node.encode()))

    step = evaluate = None
    if a.node == "ps":
        test_x, test_y = load("t10k")

        def evaluate(params):
            troupe.load_state(model, params)  # parameters and buffers
            accuracy, loss = score(model, test_x, test_y)
            return accuracy, loss, len(test_y)
    else:
        x, y = load("train")

        def step(params, samples):
            troupe.load_state(model, params)  # parameters and buffers
            model.train()  # dropout on, batch statistics updated
            model.zero_grad()
            i = torch.from_numpy(samples)
            out = model(x[i])
            loss = torch.nn.functional.cross_entropy(out, y[i])
            loss.backward()
            hits = (out.argmax(1) == y[i]).sum().item()
            # Each parameter's gradient and each buffer's new value.
            return troupe.step_result(model), loss.item() * len(i), hits

    key = os.path.join(os.path.dirname(os.path.abspath(a.config)),
                       "cluster.key")
    try:
        troupe.run_node(a.config, a.node, step or (lambda p, s: None),
                        evaluate=evaluate, key=key, fresh=a.fresh)
    except troupe.Error as e:  # e.g. troupe.ConfigError, troupe.ClusterError
        print(f"train.py: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    q = sub.add_parser("prepare", help="write the run's folder")
    q.add_argument("dir")
    q.add_argument("--mode", default="async", choices=["async", "sync"])
    q.add_argument("--workers", type=int, default=2)
    add_run_options(q)
    q = sub.add_parser("node", help="run one node of the cluster file")
    q.add_argument("config")
    q.add_argument("node")
    q.add_argument("--fresh", action="store_true",
                   help="node ps: start over instead of resuming run/ckpt")
    a = p.parse_args()
    prepare(a) if a.what == "prepare" else node(a)


if __name__ == "__main__":
    main()
