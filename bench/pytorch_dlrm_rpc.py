"""The DLRM-style example (examples/pytorch_dlrm) on PyTorch's RPC
parameter server: the reference of scripts/bench-python-tables.sh for
troupe's tables across processes.

One server process ("ps") holds the model as alone.py builds it (one
nn.EmbeddingBag per categorical field, Adagrad on their rows, Adam on the
MLP); --workers worker processes on 127.0.0.1 each take every
--workers-th batch of troupe.epoch_order and, per step, pull the batch's
distinct rows of every table and the MLP (rpc_sync), compute the
gradients, and push the rows' gradients and the MLP's (rpc_sync); the
server applies each push under its lock as it comes (async), as troupe's
shards do. Prints one JSON line: samples/s (first pull to last push, as
the server saw them), test log-loss and AUC.

  /usr/bin/python3 bench/pytorch_dlrm_rpc.py --data DIR [--workers 2]
      [--epochs 1] [--port P]
"""
import argparse
import json
import os
import sys

import numpy as np
import rpc_group
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "examples", "pytorch_dlrm"))
import troupe  # noqa: E402
from click_dlrm import (ClickLogs, add_run_options, make_model,  # noqa: E402
                        scores)

server = None  # set in the server process


class Server(rpc_group.ServerCounts):
    def __init__(self, vocabularies, a):
        super().__init__()
        self.model = make_model(a.numeric, vocabularies, a.dim, a.hidden,
                                a.seed, on_troupe=False)
        self.dense = torch.optim.Adam(self.model.mlp.parameters(), lr=a.lr)
        self.sparse = torch.optim.Adagrad(self.model.bags.parameters(),
                                          lr=a.table_lr,
                                          initial_accumulator_value=0.1,
                                          eps=0)


def pull(distinct):
    with server.lock:
        server.pulled()
        return ([bag.weight.detach()[ids]
                 for bag, ids in zip(server.model.bags, distinct)],
                [p.detach().clone() for p in server.model.mlp.parameters()])


def push(distinct, row_grads, dense_grads):
    with server.lock:
        for bag, ids, g in zip(server.model.bags, distinct, row_grads):
            bag.weight.grad = torch.sparse_coo_tensor(ids.unsqueeze(0), g,
                                                      bag.weight.shape)
        for p, g in zip(server.model.mlp.parameters(), dense_grads):
            p.grad = g
        server.sparse.step()
        server.dense.step()
        server.pushed()


def work(rank, a, train, vocabularies):
    model = make_model(a.numeric, vocabularies, a.dim, a.hidden, a.seed,
                       on_troupe=False)
    mlp = model.mlp
    numeric = torch.from_numpy(train.numeric)
    labels = torch.from_numpy(train.labels)
    for epoch in range(a.epochs):
        order = troupe.epoch_order(train.count, a.seed, epoch)
        starts = range(0, train.count, a.batch)
        for first in list(starts)[rank - 1::a.workers]:
            samples = order[first:first + a.batch].astype(np.int64)
            bags = train.bags(samples)
            distinct, local = [], []
            for ids, _ in bags:
                d, inverse = torch.unique(ids, return_inverse=True)
                distinct.append(d)
                local.append(inverse)
            rows, dense = rpc.rpc_sync("ps", pull, args=(distinct,))
            for r in rows:
                r.requires_grad_(True)
            for p, v in zip(mlp.parameters(), dense):
                p.data = v
            pooled = [F.embedding_bag(ids, r, offsets, mode="mean")
                      for ids, r, (_, offsets) in zip(local, rows, bags)]
            out = mlp(torch.cat([numeric[samples]] + pooled, 1)).squeeze(1)
            loss = F.binary_cross_entropy_with_logits(out, labels[samples])
            grads = torch.autograd.grad(loss, [*rows, *mlp.parameters()])
            rpc.rpc_sync("ps", push, args=(
                distinct, [g.detach() for g in grads[:len(rows)]],
                [g.detach() for g in grads[len(rows):]]))


def run(rank, a):
    global server
    options = rpc_group.options(a.port)
    # Every process reads the files, as every node of the example does.
    train = ClickLogs(os.path.join(a.data, "train.tsv"), a.numeric,
                      a.categorical)
    test = ClickLogs(os.path.join(a.data, "test.tsv"), a.numeric,
                     a.categorical, vocab=train.vocab)
    vocabularies = [len(v) for v in train.vocab]
    if rank == 0:
        server = Server(vocabularies, a)
        rpc_group.join(rank, a.workers, options)
        rpc.shutdown()  # waits for every worker to finish
        with torch.no_grad():
            logits = server.model(torch.from_numpy(test.numeric),
                                  test.bags(np.arange(test.count)))
        loss, auc = scores(logits.numpy(), test.labels)
        print(json.dumps({
            "impl": "pytorch-rpc-ps", "workers": a.workers,
            "steps": server.pushes,
            "samples_per_sec": server.samples_per_sec(a.batch),
            "test_log_loss": round(loss, 5), "test_auc": round(auc, 5)}),
            flush=True)
    else:
        rpc_group.join(rank, a.workers, options)
        work(rank, a, train, vocabularies)
        rpc.shutdown()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_options(p)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--port", type=int, default=29521)
    a = p.parse_args()
    mp.spawn(run, args=(a,), nprocs=a.workers + 1, join=True)


if __name__ == "__main__":
    main()
