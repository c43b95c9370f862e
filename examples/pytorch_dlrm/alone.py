"""The example's model trained by PyTorch alone, for comparison: the same
MLP start, the tables in torch.nn.EmbeddingBag (sparse gradients: Adagrad
updates only the rows a batch used, as troupe's shards do), the same
batches in the same order (troupe.epoch_order), and the test log-loss and
AUC at the end.

    python3 alone.py --data data [--epochs 2] [--threads 1]

Prints one JSON line: samples/s, test log-loss and AUC."""

import argparse
import json
import os
import time

import numpy as np
import torch

import troupe
from click_dlrm import ClickLogs, add_run_options, make_model, scores


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_options(p)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    train = ClickLogs(os.path.join(a.data, "train.tsv"), a.numeric,
                      a.categorical)
    test = ClickLogs(os.path.join(a.data, "test.tsv"), a.numeric,
                     a.categorical, vocab=train.vocab)
    vocabularies = [len(v) for v in train.vocab]
    model = make_model(a.numeric, vocabularies, a.dim, a.hidden, a.seed,
                       on_troupe=False)
    dense = torch.optim.Adam(model.mlp.parameters(), lr=a.lr)
    # troupe's Adagrad: TF's, whose accumulator starts at 0.1.
    sparse = torch.optim.Adagrad(model.bags.parameters(), lr=a.table_lr,
                                 initial_accumulator_value=0.1, eps=0)
    numeric = torch.from_numpy(train.numeric)
    labels = torch.from_numpy(train.labels)
    trained = 0
    began = time.perf_counter()
    for epoch in range(a.epochs):
        order = troupe.epoch_order(train.count, a.seed, epoch)
        for first in range(0, train.count, a.batch):
            samples = order[first:first + a.batch].astype(np.int64)
            i = torch.from_numpy(samples)
            dense.zero_grad()
            sparse.zero_grad()
            out = model(numeric[i], train.bags(samples))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                out, labels[i])
            loss.backward()
            dense.step()
            sparse.step()
            trained += len(samples)
    seconds = time.perf_counter() - began
    with torch.no_grad():
        logits = model(torch.from_numpy(test.numeric),
                       test.bags(np.arange(test.count)))
    loss, auc = scores(logits.numpy(), test.labels)
    print(json.dumps({"samples_per_sec": round(trained / seconds, 1),
                      "test_log_loss": round(loss, 5),
                      "test_auc": round(auc, 5), "epochs": a.epochs,
                      "threads": a.threads}))


if __name__ == "__main__":
    main()
