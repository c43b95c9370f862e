"""One node of scripts/tables-scale.sh's cluster, in a Python process: a
model of one embedding table (dim 16, each sample's 16 keys sum-pooled)
and a logistic layer, trained from keys drawn uniformly from the table's
vocabulary (the same in every process: a fixed seed). A worker's node
prints, once the run ends, one JSON line with its steps, the rows its
steps pulled and pushed per second, and its peak resident memory; a shard
node prints its peak resident memory.

  table_scale_node.py CONFIG NODE SAMPLES VOCABULARY
"""
import json
import os
import sys
import time

import numpy as np
import torch

import troupe

WIDTH, DIM = 16, 16


def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def model():
    torch.manual_seed(1)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ids = troupe.EmbeddingBag("ids", mode="sum")
            self.out = torch.nn.Linear(DIM, 1)

        def forward(self, rows):
            return self.out(self.ids(rows)).squeeze(1)
    return Model()


def main():
    config, node, samples, vocabulary = sys.argv[1:5]
    samples, vocabulary = int(samples), int(vocabulary)
    torch.set_num_threads(1)
    key = os.path.join(os.path.dirname(os.path.abspath(config)),
                       "cluster.key")
    if node == "prepare":
        troupe.write_parameters(os.path.join(os.path.dirname(config),
                                             "model.safetensors"), model())
        return
    step, keys, counts = None, None, {"rows": 0, "steps": 0}
    if node.startswith("w"):
        rng = np.random.default_rng(5)
        keys = {"ids": rng.integers(0, vocabulary, size=(samples, WIDTH),
                                    dtype=np.int64)}
        labels = torch.from_numpy(rng.random(samples) < 0.3).float()
        m = model()
        clock = {}

        def step(params, batch, rows):
            clock.setdefault("first", time.perf_counter())
            troupe.load_state(m, params)
            m.zero_grad()
            i = torch.from_numpy(batch)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                m(rows), labels[i])
            loss.backward()
            counts["rows"] += 2 * len(rows["ids"].unique)
            counts["steps"] += 1
            clock["last"] = time.perf_counter()
            return troupe.step_result(m, rows), loss.item() * len(batch)
    troupe.run_node(config, node, step or (lambda p, s, r: None), key=key,
                    keys=keys)
    out = {"node": node, "peak_rss_bytes": peak_rss()}
    if counts["steps"]:
        out["steps"] = counts["steps"]
        out["rows_per_sec"] = round(
            counts["rows"] / (clock["last"] - clock["first"]), 1)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
