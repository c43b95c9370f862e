"""Click logs on troupe's parameter servers with a DLRM-style PyTorch
model (click_dlrm.py) whose embedding tables live on the shards, and two
Python worker processes.

    # click logs, e.g. 200k training and 20k test lines
    troupe-clicks --out data --train 200000 --test 20000 --numeric 2 \\
        --categorical 4 --values 200 --seed 3
    # the run's folder: the model's initial MLP and a cluster file (node
    # ps0: the chief and shard 0; ps1: shard 1; w0, w1: one worker each)
    python3 train.py prepare run --data data --mode async
    # one process per node, here all on this machine
    python3 train.py node run/cluster.json ps0 &
    python3 train.py node run/cluster.json ps1 &
    python3 train.py node run/cluster.json w0 &
    python3 train.py node run/cluster.json w1

Each worker gives troupe the keys of every training sample (keys=, one
table per categorical field); troupe pulls the rows of a batch's distinct
keys from the shards that hold them, and the step pools them with
troupe.EmbeddingBag and returns their gradients beside the MLP's. Once the
run ends, node ps0 loads the last checkpoint (the MLP, and each table's
rows from troupe.read_checkpoint) into the same model built on
torch.nn.EmbeddingBag and prints its test log-loss and AUC. Needs
PYTHONPATH to hold troupe's module (build/python) and Debian's
python3-torch."""

import argparse
import json
import os
import sys

import numpy as np
import torch

import troupe
from click_dlrm import (ClickLogs, add_run_options, make_model, make_step,
                        scores, table_name)


def read_logs(spec, with_test):
    """The training logs, and the test logs after them (their tokens
    numbered after the training file's, as prepare numbered them)."""
    train = ClickLogs(os.path.join(spec["data"], "train.tsv"),
                      spec["numeric"], spec["categorical"])
    if not with_test:
        return train, None
    test = ClickLogs(os.path.join(spec["data"], "test.tsv"), spec["numeric"],
                     spec["categorical"], vocab=train.vocab)
    return train, test


def prepare(a):
    os.makedirs(a.dir, exist_ok=True)
    d = os.path.abspath(a.dir)
    spec = {"data": os.path.abspath(a.data), "numeric": a.numeric,
            "categorical": a.categorical, "dim": a.dim, "hidden": a.hidden,
            "seed": a.seed}
    train, _ = read_logs(spec, with_test=True)
    spec["vocabularies"] = [len(v) for v in train.vocab]
    with open(os.path.join(d, "model.json"), "w") as f:
        json.dump(spec, f)
    params = os.path.join(d, "model.safetensors")
    troupe.write_parameters(params, model_of(spec))

    # Ports free now and outside the range the kernel draws outgoing
    # connections' ports from, so that none is taken before its node binds.
    ports = iter(troupe.local_ports(4))
    # In sync mode the workers' gradients are averaged: each worker takes
    # half the batch, so a step sees as many samples as PyTorch alone, at
    # its learning rate (sync_lr none: troupe's default scales the rate by
    # sqrt(workers) for workers that each take a whole batch).
    batch = a.batch // 2 if a.mode == "sync" else a.batch
    tables = [{"name": table_name(f), "vocabulary": v, "dim": a.dim}
              for f, v in enumerate(spec["vocabularies"])]
    config = {
        "name": "click-dlrm-" + a.mode,
        "model": {"type": "external", "parameters": params,
                  "seed": a.seed, "tables": tables},
        "data": {"format": "external", "train_samples": train.count},
        "training": {"batch_size": batch, "epochs": a.epochs,
                     "seed": a.seed, "log_every_steps": 500,
                     "optimizer": {"type": "adam", "learning_rate": a.lr},
                     "sparse_optimizer": {"type": "adagrad",
                                          "learning_rate": a.table_lr},
                     "checkpoint": {"dir": os.path.join(d, "ckpt")}},
        "cluster": {"mode": a.mode, "prefetch": a.prefetch, "sync_lr": "none",
                    "node_timeout_s": 60, "nodes": [
            {"name": "ps0", "host": "127.0.0.1", "port": next(ports),
             "shards": 1},
            {"name": "ps1", "host": "127.0.0.1", "port": next(ports),
             "shards": 1}]
            + [{"name": "w%d" % i, "host": "127.0.0.1", "port": next(ports),
                "workers": 1} for i in range(2)]}}
    with open(os.path.join(d, "cluster.json"), "w") as f:
        json.dump(config, f, indent=1)
    print(os.path.join(d, "cluster.json"))


def model_of(spec, on_troupe=True):
    return make_model(spec["numeric"], spec["vocabularies"], spec["dim"],
                      spec["hidden"], spec["seed"], on_troupe)


def newest_checkpoint(folder):
    files = [f for f in os.listdir(folder)
             if f.startswith("ckpt-") and f.endswith(".safetensors")
             and f.count(".") == 1]
    return os.path.join(folder, max(files, key=lambda f: int(f[5:-12])))


def score_checkpoint(spec, path, test):
    """The checkpoint's MLP and tables in the model built on
    nn.EmbeddingBag, scored on the test logs: (log-loss, AUC)."""
    model = model_of(spec, on_troupe=False)
    state = model.state_dict()
    for name, value in troupe.read_checkpoint(path).items():
        state[name] = torch.from_numpy(value)
    for f in range(len(spec["vocabularies"])):
        keys, values = troupe.read_checkpoint(path, table=table_name(f))
        # Rows no training sample used stay as the model made them.
        state["bags.%d.weight" % f][torch.from_numpy(keys)] = \
            torch.from_numpy(values)
    model.load_state_dict(state)
    with torch.no_grad():
        logits = model(torch.from_numpy(test.numeric),
                       test.bags(np.arange(test.count)))
    return scores(logits.numpy(), test.labels)


def node(a):
    torch.set_num_threads(1)  # one core per process
    with open(os.path.join(os.path.dirname(a.config), "model.json")) as f:
        spec = json.load(f)
    key = os.path.join(os.path.dirname(os.path.abspath(a.config)),
                       "cluster.key")
    step, keys = None, None
    if a.node.startswith("w"):
        train, _ = read_logs(spec, with_test=False)
        keys = {table_name(f): k for f, k in enumerate(train.keys)}
        step = make_step(model_of(spec), torch.from_numpy(train.numeric),
                         torch.from_numpy(train.labels))
    try:
        summary = troupe.run_node(a.config, a.node,
                                  step or (lambda p, s, r: None),
                                  key=key, fresh=a.fresh, keys=keys)
    except troupe.Error as e:  # e.g. troupe.ConfigError, troupe.ClusterError
        print(f"train.py: error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    if summary is not None:  # the chief's node, once the run succeeded
        _, test = read_logs(spec, with_test=True)
        with open(a.config) as f:
            ckpt = json.load(f)["training"]["checkpoint"]["dir"]
        path = newest_checkpoint(ckpt)
        loss, auc = score_checkpoint(spec, path, test)
        print("%s: test log-loss %.4f, test AUC %.4f (%d examples/s)"
              % (os.path.basename(path), loss, auc,
                 summary["examples_per_sec"]), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    q = sub.add_parser("prepare", help="write the run's folder")
    q.add_argument("dir")
    q.add_argument("--mode", default="async", choices=["async", "sync"])
    q.add_argument("--prefetch", action="store_true",
                   help="async: lease and pull the next batch's rows while "
                        "a step computes")
    add_run_options(q)
    q = sub.add_parser("node", help="run one node of the cluster file")
    q.add_argument("config")
    q.add_argument("node")
    q.add_argument("--fresh", action="store_true",
                   help="node ps0: start over instead of resuming run/ckpt")
    a = p.parse_args()
    prepare(a) if a.what == "prepare" else node(a)


if __name__ == "__main__":
    main()
