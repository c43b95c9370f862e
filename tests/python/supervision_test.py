"""Python worker processes under the chief's supervision, as an operator
sees them: a chief's node and two worker nodes, each a Python process
(tests/python/linear_node.py), on 127.0.0.1. A worker process killed
with kill -9 is seen by the chief and its leases go back; a restarted
one rejoins; one stopped with SIGTERM leaves the run; either way every
sample is trained once per epoch and the chief evaluates with the user's
function to the end.

Run by ctest (python.supervision) with TROUPE_SHELL naming troupe-shell."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import unittest

import numpy as np

import troupe
from node_processes import epoch_samples, free_port, python_nodes

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES, BATCH, EPOCHS = 4000, 16, 3
STEP_SECONDS = "0.004"  # each step's sleep: a run of about ten seconds


class python_cluster(python_nodes):
    """A cluster file with nodes chief (two shards), py0 and py1 (one
    worker each), every node a Python process; their logs in files."""

    def __init__(self, test, on_node_loss="move"):
        super().__init__(test, "troupe-pysup-",
                         os.path.join(HERE, "linear_node.py"), STEP_SECONDS)
        d = self.dir
        params = os.path.join(d, "model.safetensors")
        troupe.write_parameters(params, {"w": np.zeros(6, np.float32),
                                         "b": np.float32(0)})
        self.chief_port = free_port()
        with open(self.config, "w") as f:
            json.dump({
                "model": {"type": "external", "parameters": params},
                "data": {"format": "external", "train_samples": SAMPLES},
                "training": {"batch_size": BATCH, "epochs": EPOCHS,
                             "optimizer": {"type": "sgd",
                                           "learning_rate": 0.02},
                             "checkpoint": {"dir": os.path.join(d, "ckpt")},
                             "log_every_steps": 50},
                "cluster": {"mode": "async", "node_timeout_s": 30,
                            "on_node_loss": on_node_loss, "nodes": [
                                {"name": "chief", "port": self.chief_port,
                                 "shards": 2},
                                {"name": "py0", "port": free_port(),
                                 "workers": 1},
                                {"name": "py1", "port": free_port(),
                                 "workers": 1}]}}, f)
        self.start("chief")  # makes the key before the others read it
        self.wait_for("chief", "identity:", 30)
        self.start("py0")
        self.start("py1")


class Supervision(unittest.TestCase):
    def finished(self, cluster, *nodes):
        """Waits for the chief and `nodes` to end well; the chief's log."""
        self.assertEqual(cluster.wait("chief"), 0, cluster.logs())
        for n in nodes:
            self.assertEqual(cluster.wait(n, 30), 0, cluster.logs())
        log = cluster.log("chief")
        self.assertEqual(epoch_samples(log), [SAMPLES] * EPOCHS, log)
        # The chief evaluated with the user's function, to the end.
        scores = re.findall(r"test accuracy = ([\d.]+), test loss = "
                            r"[\d.]+ \(500 examples", log)
        self.assertGreaterEqual(len(scores), EPOCHS, log)
        self.assertGreater(float(scores[-1]), 0.9, log)
        return log

    def test_a_killed_python_node_is_seen_and_its_worker_moves(self):
        cluster = python_cluster(self)
        cluster.wait_for("chief", cluster.step_reached(100), 60)
        cluster.procs["py1"].send_signal(signal.SIGKILL)
        cluster.wait_for("chief", "worker 1 moves from node py1 to node py0",
                         20)
        log = self.finished(cluster, "py0")
        self.assertIn("node py1 (127.0.0.1:", log)
        self.assertIn("worker 1 failed", log)

    def test_a_restarted_python_node_gets_its_moved_worker_back(self):
        cluster = python_cluster(self)  # on_node_loss "move"
        cluster.wait_for("chief", cluster.step_reached(100), 60)
        cluster.procs["py1"].send_signal(signal.SIGKILL)
        cluster.wait_for("chief", "worker 1 moves from node py1 to node py0",
                         20)
        # Paused until the node is back, so that the run cannot end first.
        cluster.shell("pause")
        cluster.start("py1", "py1-again")
        # Sent back once its step in flight ends, and said so.
        cluster.wait_for("chief", "worker 1 goes back from node py0 to its "
                                  "own node py1 once its step in flight ends",
                         30)
        cluster.shell("resume")
        cluster.wait_for("chief", "worker 1 moves from node py0 to node py1 "
                                  "(its own, back)", 30)
        workers = {w["id"]: w for w in cluster.shell("workers")}
        self.assertEqual(workers["worker:1"]["node"], "py1", workers)
        self.assertEqual(workers["worker:1"]["pid"],
                         cluster.procs["py1-again"].pid, workers)
        log = self.finished(cluster, "py0", "py1-again")
        # It trained on its own node again, and its return restarted
        # nothing: one restart, for the kill.
        self.assertRegex(cluster.log("py1-again"), r"registered")
        inspected = log.count("worker 1 failed")
        self.assertEqual(inspected, 1, log)

    def test_a_restarted_python_node_rejoins_and_trains_again(self):
        cluster = python_cluster(self, on_node_loss="wait")
        cluster.wait_for("chief", cluster.step_reached(100), 60)
        cluster.procs["py1"].send_signal(signal.SIGKILL)
        cluster.wait_for("chief", "worker 1 waits for node py1", 20)
        # Paused until the node is back: py0 alone could otherwise end the
        # run before a new process has started.
        cluster.shell("pause")
        cluster.start("py1", "py1-again")
        cluster.wait_for(
            "chief", lambda t: len(re.findall(r"node py1 \(\S+\) is up", t)) >= 2,
            60)
        # The shell shows the Python workers' processes, and the error
        # the killed one's worker failed with.
        workers = {w["id"]: w for w in cluster.shell("workers")}
        self.assertEqual(sorted(workers), ["worker:0", "worker:1"], workers)
        for w, label in (("worker:0", "py0"), ("worker:1", "py1-again")):
            self.assertEqual(workers[w]["node"], label[:3], workers)
            self.assertEqual(workers[w]["pid"], cluster.procs[label].pid,
                             workers)
            self.assertEqual(workers[w]["program"],
                             os.path.basename(sys.executable)[:15], workers)
            self.assertEqual(workers[w]["host"], socket.gethostname(),
                             workers)
        self.assertIsNone(workers["worker:0"]["last_error"], workers)
        # CAF's exit reason, in words.
        self.assertEqual("its process was lost (the connection to its node "
                         "broke)", workers["worker:1"]["last_error"], workers)
        inspected = cluster.shell("inspect worker:1")
        self.assertEqual(inspected["pid"], cluster.procs["py1-again"].pid)
        self.assertEqual(inspected["restarts"], 1, inspected)
        # ... and kills one as it kills troupe's own.
        cluster.shell("kill worker:0")
        cluster.shell("resume")
        cluster.wait_for("chief", "worker 0 failed", 20)
        log = self.finished(cluster, "py0", "py1-again")
        self.assertIn("shell: kill worker:0", log)
        self.assertRegex(cluster.log("py1-again"), r"registered")

    def test_a_python_process_joins_a_running_cluster(self):
        cluster = python_cluster(self)
        cluster.wait_for("chief", cluster.step_reached(100), 60)
        # troupe-node cannot run the user's step: it is refused, by name.
        refused = subprocess.run(
            [os.environ["TROUPE_NODE"], "--join",
             "127.0.0.1:%d" % cluster.chief_port, "--workers", "1", "--key",
             cluster.key], capture_output=True, text=True, timeout=30)
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("trains an external model, whose steps are a Python "
                      "function: join it from Python (troupe.join)",
                      refused.stderr)
        cluster.start("join")
        cluster.wait_for("chief", "node py2 (", 30)
        self.assertRegex(cluster.log("chief"),
                         r"(?m)node py2 \(\S+\) is up, joining with 1 worker$")
        log = self.finished(cluster, "py0", "py1", "join")
        self.assertIn("worker 2: step", log)  # the joined worker trained

    def test_sigterm_makes_a_python_node_leave_the_run(self):
        cluster = python_cluster(self)
        cluster.wait_for("chief", cluster.step_reached(100), 60)
        cluster.procs["py1"].send_signal(signal.SIGTERM)
        self.assertEqual(cluster.wait("py1", 30), 0, cluster.logs())
        self.assertIn("left the run", cluster.log("py1"))
        self.finished(cluster, "py0")


if __name__ == "__main__":
    unittest.main()
