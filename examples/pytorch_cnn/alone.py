"""The example's CNN trained by PyTorch alone, in one process: the same
model, initial values, batch size, optimizer and epochs as train.py, for
comparison. Prints the test accuracy.

    python3 alone.py [--epochs 3] [--batch 64] [--lr 0.05] [--seed 1]
                     [--threads 1] [--order numpy|troupe] [--samples N]
                     [--batchnorm] [--dropout 0.25]"""

import argparse
import json
import time

import numpy as np
import torch

from fashion_cnn import add_run_options, load, make_model, score


def main():
    p = argparse.ArgumentParser()
    add_run_options(p)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--order", choices=["numpy", "troupe"], default="numpy",
                   help="troupe: the batches a troupe run with this seed "
                        "trains (troupe.epoch_order), to compare on the "
                        "same data order")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    x, y = load("train")
    x, y = x[:a.samples], y[:a.samples]
    test_x, test_y = load("t10k")
    model = make_model(a.seed, a.batchnorm, a.dropout)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    start = time.perf_counter()
    for epoch in range(a.epochs):
        # The seed picks the initial values, dropout and the order.
        if a.order == "troupe":
            import troupe
            order = troupe.epoch_order(len(x), a.seed, epoch).astype(np.int64)
            order = torch.from_numpy(order)
        else:
            order = torch.from_numpy(np.random.RandomState(
                (a.seed - 1) * 1000 + epoch).permutation(len(x)))
        model.train()
        for b in range(0, len(x), a.batch):  # the last one partial, as troupe
            i = order[b:b + a.batch]
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[i]), y[i]).backward()
            opt.step()
    seconds = time.perf_counter() - start
    accuracy, loss = score(model, test_x, test_y)
    print(json.dumps({"impl": "pytorch-alone", "epochs": a.epochs,
                      "samples_per_sec": round(a.epochs * len(x) / seconds, 1),
                      "test_accuracy": round(accuracy, 4),
                      "test_loss": round(loss, 4)}))


if __name__ == "__main__":
    main()
