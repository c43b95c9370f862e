"""One node of a cluster file in a Python process whose model keeps two
embedding tables on the shards: a NumPy regression in which each sample's
prediction is the sum of its keys' rows (dim 1; its first key's in table
"first", the others' in table "rest") plus a bias, trained by
troupe.run_node with keys= and a hand-written step. Two tables, so that
each step's rows of a shard travel as several tables in one message. The
failure tests start and kill it.

    table_node.py CONFIG NODE KEY [STEP_SECONDS]

Each step sleeps STEP_SECONDS (default 0) so that a run lasts long
enough to kill a node in the middle of it. The data is the same in every
process (a fixed seed). Exits with run_node's code."""

import sys
import time

import numpy as np

import troupe

SAMPLES, VOCAB, WIDTH = 3000, 500, 3


def user_data():
    rng = np.random.default_rng(11)
    keys = rng.integers(0, VOCAB, size=(SAMPLES, WIDTH))
    truth = rng.normal(size=VOCAB).astype(np.float32)
    y = truth[keys].sum(1) + 0.5
    return keys, y.astype(np.float32)


def main():
    config, node, key = sys.argv[1:4]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    keys, y = user_data()

    def step(params, samples, rows):
        if pause > 0:
            time.sleep(pause)
        # The bias is b[0]; the rest of b gives the shards a slice each.
        err = params["b"][0] - y[samples]
        for r in rows.values():
            err = err + r.values[:, 0][r.inverse].sum(1)
        n = np.float32(len(samples))
        out = {}
        for name, r in rows.items():
            grad = np.zeros_like(r.values)
            np.add.at(grad[:, 0], r.inverse.ravel(),
                      np.repeat(err / n, r.inverse.shape[1]))
            out[name] = grad
        gb = np.zeros(4, np.float32)
        gb[0] = err.sum() / n
        out["b"] = gb
        return out, float(0.5 * (err * err).sum())

    try:
        troupe.run_node(config, node, step, key=key, keys={"first": keys[:, :1], "rest": keys[:, 1:]})
    except troupe.Error as e:
        print("table_node.py: error: %s" % e, file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
