"""PyTorch's click model: the reference for troupe's click model in one
process and across processes (scripts/bench-clicks.sh runs both in one go).

The model is troupe's (models/click_model.hpp): every categorical field's
tokens looked up in one embedding table and mean-pooled per field
(nn.EmbeddingBag(mode="mean", sparse=True); an empty field pools to zeros),
concatenated with the numeric fields, into an MLP (ReLU, He-normal weights,
zero biases) with a two-way softmax output; rows start uniform in
[-0.05, 0.05]. The table learns with SparseAdam (lazy Adam: the moments of
the rows a batch touches), the MLP with Adam. Log-loss and ROC AUC on the
test file at the end.

Tokens are numbered per field in the order they are first read (train,
then test): a table of exactly the rows the data has, where troupe hashes
(field, token) into its vocabulary and makes rows on first touch.

--mode local: one process, one training loop (torch threads: --threads).
--mode rpc: one parameter-server process holding the table and the MLP and
  --workers worker processes on 127.0.0.1, talking through
  torch.distributed.rpc (TensorPipe) in the pattern of PyTorch's
  parameter-server tutorial, with rows pulled and pushed as troupe's
  workers do: each step a worker pulls the batch's distinct rows and the
  MLP (rpc_sync), computes the gradients, and pushes the rows' gradients
  and the MLP's (rpc_sync); the server applies each push under a lock as it
  arrives (async). Workers share each epoch's shuffled batches round-robin.

Samples/s counts the batches trained over the training time (local: the
loop; rpc: first pull to last push, as the server saw them). Prints one
JSON line.

  /usr/bin/python3 bench/pytorch_clicks.py --data DIR --numeric 2
      --categorical 4 [--mode local|rpc] [--workers 2] [--epochs 1]
      [--batch 256] [--dim 8] [--hidden 64 32] [--lr 0.001]
      [--sparse-lr 0.01] [--threads 1] [--port P]
"""
import argparse
import json
import os
import time

import numpy as np
import rpc_group
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn.functional as F


class ClickLog:
    """One TSV file: labels, numeric fields, and the categorical fields as
    bags (bag b = sample * fields + field holds ids[starts[b]:+lens[b]])."""

    def __init__(self, path, numeric, categorical, vocab):
        labels, values, ids, lens = [], [], [], []
        with open(path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                labels.append(int(cols[0]))
                values.append([float(v) if v else 0.0
                               for v in cols[1:1 + numeric]])
                for field, text in enumerate(cols[1 + numeric:]):
                    tokens = text.split(",") if text else []
                    for t in tokens:
                        ids.append(vocab.setdefault((field, t), len(vocab)))
                    lens.append(len(tokens))
        self.count = len(labels)
        self.fields = categorical
        self.labels = torch.tensor(labels, dtype=torch.int64)
        self.numeric = torch.tensor(values, dtype=torch.float32).reshape(
            self.count, numeric)
        self.ids = np.asarray(ids, dtype=np.int64)
        self.lens = np.asarray(lens, dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.lens)[:-1]))

    def bags(self, samples):
        """The ids and EmbeddingBag offsets of `samples`' bags, in order."""
        b = (samples[:, None] * self.fields + np.arange(self.fields)).ravel()
        lens, starts = self.lens[b], self.starts[b]
        offsets = np.concatenate(([0], np.cumsum(lens)[:-1]))
        within = np.arange(lens.sum()) - np.repeat(offsets, lens)
        ids = self.ids[np.repeat(starts, lens) + within]
        return torch.from_numpy(ids), torch.from_numpy(offsets)


def load(a):
    vocab = {}
    train = ClickLog(os.path.join(a.data, "train.tsv"), a.numeric,
                     a.categorical, vocab)
    test = ClickLog(os.path.join(a.data, "test.tsv"), a.numeric,
                    a.categorical, vocab)
    return train, test, len(vocab)


def make_mlp(a):
    torch.manual_seed(a.seed)
    sizes = [a.numeric + a.categorical * a.dim, *a.hidden, 2]
    layers = []
    for i in range(len(sizes) - 1):
        linear = torch.nn.Linear(sizes[i], sizes[i + 1])
        torch.nn.init.normal_(linear.weight, 0.0, (2.0 / sizes[i]) ** 0.5)
        torch.nn.init.zeros_(linear.bias)
        layers += [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def make_table(rows, a):
    table = torch.nn.EmbeddingBag(rows, a.dim, mode="mean", sparse=True)
    torch.nn.init.uniform_(table.weight, -0.05, 0.05)
    return table


def batches(count, a, epoch):
    order = np.random.RandomState(a.seed + epoch).permutation(count)
    return [order[b * a.batch:(b + 1) * a.batch]
            for b in range(count // a.batch)]


def scores(table_weight, mlp, data):
    """Test log-loss and ROC AUC of the model over all of `data`."""
    with torch.no_grad():
        p = []
        for first in range(0, data.count, 8192):
            s = np.arange(first, min(first + 8192, data.count))
            ids, offsets = data.bags(s)
            pooled = F.embedding_bag(ids, table_weight, offsets, mode="mean")
            x = torch.cat([data.numeric[s], pooled.reshape(len(s), -1)], 1)
            p.append(torch.softmax(mlp(x), 1)[:, 1])
        p = torch.cat(p).double().clamp(1e-7, 1 - 1e-7).numpy()
    y = data.labels.numpy()
    loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    # AUC: the Mann-Whitney U of the positives' ranks (ties get mean ranks).
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    sorted_p = p[order]
    i = 0
    while i < len(p):
        j = i
        while j + 1 < len(p) and sorted_p[j + 1] == sorted_p[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y.sum()
    neg = len(y) - pos
    auc = (ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)
    return float(loss), float(auc)


def local(a):
    torch.set_num_threads(a.threads)
    train, test, rows = load(a)
    table, mlp = make_table(rows, a), make_mlp(a)
    sparse_opt = torch.optim.SparseAdam(table.parameters(), lr=a.sparse_lr)
    dense_opt = torch.optim.Adam(mlp.parameters(), lr=a.lr)
    steps = 0
    began = time.perf_counter()
    for epoch in range(a.epochs):
        for s in batches(train.count, a, epoch):
            ids, offsets = train.bags(s)
            pooled = table(ids, offsets).reshape(len(s), -1)
            x = torch.cat([train.numeric[s], pooled], 1)
            loss = F.cross_entropy(mlp(x), train.labels[s])
            sparse_opt.zero_grad()
            dense_opt.zero_grad()
            loss.backward()
            sparse_opt.step()
            dense_opt.step()
            steps += 1
    seconds = time.perf_counter() - began
    log_loss, auc = scores(table.weight, mlp, test)
    return {"impl": "pytorch-local", "threads": a.threads, "rows": rows,
            "steps": steps, "samples_per_sec": round(steps * a.batch / seconds, 1),
            "test_log_loss": round(log_loss, 4), "test_auc": round(auc, 4)}


class Server(rpc_group.ServerCounts):
    def __init__(self, rows, a):
        super().__init__()
        self.table = make_table(rows, a)
        self.mlp = make_mlp(a)
        self.sparse_opt = torch.optim.SparseAdam(self.table.parameters(),
                                                 lr=a.sparse_lr)
        self.dense_opt = torch.optim.Adam(self.mlp.parameters(), lr=a.lr)


server = None  # set in the server process


def pull(ids):
    with server.lock:
        server.pulled()
        return (server.table.weight.detach()[ids],
                [p.detach().clone() for p in server.mlp.parameters()])


def push(ids, row_grads, dense_grads):
    with server.lock:
        w = server.table.weight
        w.grad = torch.sparse_coo_tensor(ids.unsqueeze(0), row_grads,
                                         w.shape)
        for p, g in zip(server.mlp.parameters(), dense_grads):
            p.grad = g
        server.sparse_opt.step()
        server.dense_opt.step()
        server.pushed()


def work(rank, a, train):
    mlp = make_mlp(a)
    for epoch in range(a.epochs):
        for s in batches(train.count, a, epoch)[rank - 1::a.workers]:
            ids, offsets = train.bags(s)
            distinct, local_ids = torch.unique(ids, return_inverse=True)
            rows, dense = rpc.rpc_sync("ps", pull, args=(distinct,))
            rows.requires_grad_(True)
            for p, v in zip(mlp.parameters(), dense):
                p.data = v
            pooled = F.embedding_bag(local_ids, rows, offsets, mode="mean")
            x = torch.cat([train.numeric[s], pooled.reshape(len(s), -1)], 1)
            loss = F.cross_entropy(mlp(x), train.labels[s])
            grads = torch.autograd.grad(loss, [rows, *mlp.parameters()])
            rpc.rpc_sync("ps", push, args=(distinct, grads[0],
                                           [g.detach() for g in grads[1:]]))


def run(rank, a):
    global server
    options = rpc_group.options(a.port)
    # Every process reads the files (as every troupe node does): the
    # workers for their batches, the server for the table's size and the
    # test set.
    train, test, rows = load(a)
    if rank == 0:
        server = Server(rows, a)
        rpc_group.join(rank, a.workers, options)
        rpc.shutdown()  # waits for every worker to finish
        log_loss, auc = scores(server.table.weight.detach(), server.mlp, test)
        print(json.dumps({
            "impl": "pytorch-rpc-ps", "workers": a.workers, "rows": rows,
            "steps": server.pushes,
            "samples_per_sec": server.samples_per_sec(a.batch),
            "test_log_loss": round(log_loss, 4), "test_auc": round(auc, 4)}),
            flush=True)
    else:
        rpc_group.join(rank, a.workers, options)
        work(rank, a, train)
        rpc.shutdown()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True,
                   help="folder of train.tsv and test.tsv")
    p.add_argument("--numeric", type=int, required=True)
    p.add_argument("--categorical", type=int, required=True)
    p.add_argument("--mode", choices=["local", "rpc"], default="local")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 32])
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--sparse-lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=29519)
    a = p.parse_args()
    if a.mode == "local":
        print(json.dumps(local(a)), flush=True)
    else:
        mp.spawn(run, args=(a,), nprocs=a.workers + 1, join=True)


if __name__ == "__main__":
    main()
