"""One node of a cluster file in a Python process, as a user runs one:
troupe.run_node with a NumPy linear model's step (and, on the chief's
node, its evaluation on a held-out set). The supervision tests start,
kill and restart it.

    linear_node.py CONFIG NODE KEY [STEP_SECONDS]

NODE "join" joins the running cluster instead (troupe.join, one worker),
at the chief's address in CONFIG.

Each step sleeps STEP_SECONDS (default 0) so that a run lasts long
enough to kill a node in the middle of it. The data is the same in
every process (a fixed seed), as a user's dataset on each machine is.
Exits with run_node's code."""

import json
import sys
import time

import numpy as np

import troupe

FEATURES, SAMPLES, TEST_SAMPLES = 6, 4000, 500


def user_data(count, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (count, FEATURES)).astype(np.float32)
    w = np.arange(1, FEATURES + 1, dtype=np.float32)
    return x, (x @ w + 0.5).astype(np.float32)


def run(node):
    """Runs a node as troupe-node would: its exit code, its error line."""
    try:
        node()
    except troupe.Error as e:
        print("linear_node.py: error: %s" % e, file=sys.stderr)
        sys.exit(e.exit_code)


def main():
    config, node, key = sys.argv[1:4]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    x, y = user_data(SAMPLES, 1)
    test_x, test_y = user_data(TEST_SAMPLES, 2)

    def step(params, samples):
        if pause > 0:
            time.sleep(pause)
        err = x[samples] @ params["w"] + params["b"] - y[samples]
        n = np.float32(len(samples))
        return ({"w": (err @ x[samples] / n).astype(np.float32),
                 "b": np.float32(err.sum() / n)},
                float(0.5 * (err * err).sum()))

    def evaluate(params):
        err = test_x @ params["w"] + params["b"] - test_y
        # "accuracy": the share of predictions within 0.5 of the target.
        return (float(np.mean(np.abs(err) < 0.5)),
                float(0.5 * np.mean(err * err)), TEST_SAMPLES)

    if node == "join":
        with open(config) as f:
            nodes = json.load(f)["cluster"]["nodes"]
        chief = [n for n in nodes if n["name"] == "chief"][0]
        run(lambda: troupe.join("127.0.0.1:%d" % chief["port"], step,
                                key=key, name="py2"))
        return
    is_chief = node == "chief"
    run(lambda: troupe.run_node(config, node, step,
                                evaluate=evaluate if is_chief else None,
                                key=key))


if __name__ == "__main__":
    main()
