"""The DLRM-style example's step function (make_step of
examples/pytorch_dlrm/click_dlrm.py, what train.py's workers run) timed
alone: what a Python worker's step costs without troupe around it,
on synthetic batches (256 samples, 4 tables of 100,000 Zipf keys, dim 8,
the example's MLP), and the same in N processes at once, which shows how
much one core's step slows when the others are busy.

    /usr/bin/python3 bench/dlrm_step_alone.py [--processes N] [--steps S]

Prints one JSON line: the mean milliseconds of a step in each process.
PYTHONPATH must hold troupe's Python package (build/python).
"""
import argparse
import json
import multiprocessing
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "examples", "pytorch_dlrm"))
from click_dlrm import make_model, make_step, table_name  # noqa: E402

from troupe.embedding import Rows  # noqa: E402

BATCH, FIELDS, VOCABULARY, DIM, NUMERIC = 256, 4, 100000, 8, 2


def time_steps(steps, out):
    torch.set_num_threads(1)
    rng = np.random.default_rng(os.getpid())
    model = make_model(NUMERIC, [VOCABULARY] * FIELDS, DIM)
    params = {k: v.detach().numpy().copy()
              for k, v in model.state_dict().items()}
    numeric = torch.from_numpy(rng.random((VOCABULARY, NUMERIC),
                                          dtype=np.float32))
    labels = torch.from_numpy((rng.random(VOCABULARY) < 0.3)
                              .astype(np.float32))

    def batch():
        rows = {}
        for f in range(FIELDS):
            keys = (rng.zipf(1.3, size=(BATCH, 1)) % VOCABULARY).astype(
                np.int64)
            unique, inverse = np.unique(keys, return_inverse=True)
            rows[table_name(f)] = Rows(
                table_name(f), keys, unique,
                inverse.reshape(BATCH, 1).astype(np.int64),
                rng.random((len(unique), DIM), dtype=np.float32))
        return rng.integers(0, VOCABULARY, BATCH), rows

    step = make_step(model, numeric, labels)

    batches = [batch() for _ in range(steps + 20)]
    for samples, rows in batches[:20]:  # warm-up
        step(params, samples, rows)
    began = time.perf_counter()
    for samples, rows in batches[20:]:
        step(params, samples, rows)
    out.put(1000 * (time.perf_counter() - began) / steps)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--steps", type=int, default=400)
    a = p.parse_args()
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=time_steps, args=(a.steps, out))
             for _ in range(a.processes)]
    for proc in procs:
        proc.start()
    ms = sorted(out.get() for _ in procs)
    for proc in procs:
        proc.join()
    print(json.dumps({"processes": a.processes,
                      "step_ms": [round(m, 3) for m in ms]}))


if __name__ == "__main__":
    main()
