"""A Python worker node in a cluster of processes on 127.0.0.1: the chief
and the shards in a troupe-node process, the workers in this Python
process (troupe.run_node), pulls and pushes on the data plane between the
two. One worker in sync mode with SGD ends where a NumPy loop over the
same batches ends.

Run by ctest (python.cluster_worker) with TROUPE_NODE naming the
troupe-node binary."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import troupe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import free_port  # noqa: E402

FEATURES, SAMPLES, BATCH, LR = 4, 160, 8, 0.1


class ClusterWorker(unittest.TestCase):
    def test_a_python_node_trains_against_a_troupe_node_chief(self):
        tmp = tempfile.TemporaryDirectory(prefix="troupe-pynode-")
        self.addCleanup(tmp.cleanup)
        d = tmp.name
        rng = np.random.default_rng(5)
        x = rng.uniform(-1, 1, (SAMPLES, FEATURES)).astype(np.float32)
        y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32)).astype(
            np.float32)
        w0 = np.full((FEATURES,), 0.1, np.float32)
        params = os.path.join(d, "model.safetensors")
        troupe.write_parameters(params, {"w": w0})
        config = os.path.join(d, "run.json")
        run = {
            "model": {"type": "external", "parameters": params},
            "data": {"format": "external", "train_samples": SAMPLES},
            "training": {"batch_size": BATCH, "epochs": 3,
                         "optimizer": {"type": "sgd",
                                       "learning_rate": LR},
                         "checkpoint": {"dir": os.path.join(d, "ckpt")},
                         "log_every_steps": 100000},
            "cluster": {"mode": "sync", "node_timeout_s": 20, "nodes": [
                {"name": "ps", "port": free_port(), "shards": 2},
                {"name": "py", "port": free_port(), "workers": 1}]}}
        with open(config, "w") as f:
            json.dump(run, f)
        # The Python node has no copy of the parameters file: its worker
        # gets the tensors' shapes from the chief.
        py_config = os.path.join(d, "py.json")
        run["model"]["parameters"] = os.path.join(d, "elsewhere",
                                                  "model.safetensors")
        with open(py_config, "w") as f:
            json.dump(run, f)
        key = os.path.join(d, "cluster.key")
        chief_log = open(os.path.join(d, "chief.log"), "w+")
        self.addCleanup(chief_log.close)
        chief = subprocess.Popen(
            [os.environ["TROUPE_NODE"], "--config", config, "--node", "ps",
             "--key", key], stdout=chief_log, stderr=subprocess.STDOUT)
        def end_chief():
            if chief.poll() is None:
                chief.kill()
            chief.wait()
        self.addCleanup(end_chief)
        batches = []

        def step(values, samples):
            w = values["w"]
            err = x[samples] @ w - y[samples]
            batches.append(samples.copy())
            grad = (err @ x[samples] / len(samples)).astype(np.float32)
            return {"w": grad}, float(0.5 * (err * err).sum())

        # The key file is made by whichever process comes first.
        self.assertIsNone(troupe.run_node(py_config, "py", step, key=key))
        chief_code = chief.wait(timeout=60)
        chief_log.seek(0)
        log = chief_log.read()
        self.assertEqual(chief_code, 0, log)
        self.assertEqual(len(batches), 3 * SAMPLES // BATCH, log)
        w = w0.copy()
        for s in batches:
            err = x[s] @ w - y[s]
            w = (w - np.float32(LR)
                 * (err @ x[s] / len(s)).astype(np.float32)).astype(
                     np.float32)
        ckpt = os.path.join(d, "ckpt")
        newest = max(os.listdir(ckpt),
                     key=lambda f: int(f.split("-")[1].split(".")[0]))
        got = troupe.read_checkpoint(os.path.join(ckpt, newest))
        np.testing.assert_allclose(got["w"], w, rtol=1e-5, atol=1e-6)

    def test_evaluate_and_metrics_on_a_node_without_the_chief_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            params = os.path.join(d, "m.safetensors")
            troupe.write_parameters(params, {"w": np.zeros(2, np.float32)})
            config = os.path.join(d, "run.json")
            with open(config, "w") as f:
                json.dump({
                    "model": {"type": "external", "parameters": params},
                    "data": {"format": "external", "train_samples": 8},
                    "cluster": {"nodes": [
                        {"name": "ps", "port": free_port(), "shards": 1},
                        {"name": "py", "port": free_port(), "workers": 1}]}},
                    f)
            with self.assertRaises(troupe.ConfigError) as caught:
                troupe.run_node(config, "py", lambda p, s: None,
                                evaluate=lambda p: (0, 0))
            self.assertIn("evaluate runs on the chief's node (ps), not on "
                          "node py", str(caught.exception))
            with self.assertRaises(troupe.ConfigError) as caught:
                troupe.run_node(config, "py", lambda p, s: None,
                                metrics_listen="127.0.0.1:0")
            self.assertIn("metrics_listen: the chief's node (ps) serves",
                          str(caught.exception))
            with self.assertRaises(troupe.ConfigError) as caught:
                troupe.run_node(config, "nope", lambda p, s: None)
            self.assertIn('no node "nope"', str(caught.exception))


if __name__ == "__main__":
    unittest.main()
