"""An external model's embedding tables (two) through the failures an
operator meets, every node a Python process (tests/python/table_node.py) on
127.0.0.1: a worker process killed with kill -9 (its worker moves, its
leases go back) and a shard node killed with kill -9 while a replica
keeps its shard (the replica takes over, rows and all); either way the
run ends with every sample trained once per epoch and no step lost.

Run by ctest (python.table_failures)."""

import json
import os
import re
import signal
import sys
import unittest

import numpy as np

import troupe

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from node_processes import epoch_samples, free_port, python_nodes  # noqa: E402
from table_node import SAMPLES, VOCAB  # noqa: E402

BATCH, EPOCHS = 16, 3
STEP_SECONDS = "0.004"  # each step's sleep: a run of several seconds


class table_cluster(python_nodes):
    """Nodes `shard_nodes` (name -> shards; the first also runs the
    chief), py0 and py1 (one worker each), every one a Python process."""

    def __init__(self, test, shard_nodes, **cluster):
        super().__init__(test, "troupe-tabfail-",
                         os.path.join(HERE, "table_node.py"), STEP_SECONDS)
        d = self.dir
        params = os.path.join(d, "model.safetensors")
        troupe.write_parameters(params, {"b": np.zeros(4, np.float32)})
        nodes = [{"name": n, "port": free_port(), "shards": s}
                 for n, s in shard_nodes.items()]
        self.chief_port = nodes[0]["port"]
        nodes += [{"name": "py%d" % i, "port": free_port(), "workers": 1}
                  for i in range(2)]
        self.chief = nodes[0]["name"]
        with open(self.config, "w") as f:
            json.dump({
                "model": {"type": "external", "parameters": params,
                          "tables": [{"name": name, "vocabulary": VOCAB,
                                      "dim": 1, "init_scale": 0,
                                      "optimizer": {"type": "sgd",
                                                    "learning_rate": 2.0}}
                                     for name in ("first", "rest")]},
                "data": {"format": "external", "train_samples": SAMPLES},
                "training": {"batch_size": BATCH, "epochs": EPOCHS,
                             "optimizer": {"type": "sgd",
                                           "learning_rate": 0.05},
                             "checkpoint": {"dir": os.path.join(d, "ckpt")},
                             "log_every_steps": 50},
                "cluster": dict({"mode": "async", "node_timeout_s": 30,
                                 "nodes": nodes}, **cluster)}, f)
        self.start(self.chief)  # makes the key before the others read it
        self.wait_for(self.chief, "identity:", 30)
        for n in list(shard_nodes)[1:] + ["py0", "py1"]:
            self.start(n)


def last_loss(log):
    return float(re.findall(r"^step \d+, epoch [\d.]+, loss = ([\d.]+)", log,
                            re.M)[-1])


class TableFailures(unittest.TestCase):
    def finished(self, cluster, *nodes):
        self.assertEqual(cluster.wait(cluster.chief), 0, cluster.logs())
        for n in nodes:
            self.assertEqual(cluster.wait(n, 30), 0, cluster.logs())
        log = cluster.log(cluster.chief)
        self.assertEqual(epoch_samples(log), [SAMPLES] * EPOCHS, log)
        # The rows learned: the loss of predicting 0.5 from the bias alone
        # is the planted rows' variance, 3 / 2.
        self.assertLess(last_loss(log), 0.3, log)
        return log

    def test_a_killed_worker_process_moves_and_its_rows_stay(self):
        cluster = table_cluster(self, {"chief": 2})
        cluster.wait_for("chief", cluster.step_reached(100), 60)
        cluster.procs["py1"].send_signal(signal.SIGKILL)
        cluster.wait_for("chief", "worker 1 moves from node py1 to node py0",
                         20)
        self.finished(cluster, "py0")

    def test_a_killed_shard_node_with_a_replica_loses_no_step(self):
        cluster = table_cluster(self, {"chief": 1, "s1": 1},
                                shard_replicas=1)
        cluster.wait_for("chief", cluster.step_reached(150), 60)
        cluster.procs["s1"].send_signal(signal.SIGKILL)
        log = self.finished(cluster, "py0", "py1")
        self.assertIn("replicas took over: 1), steps lost and retrained: 0",
                      log)
        self.assertNotIn("tables restored", log)

    def test_shards_added_and_drained_take_the_rows_along(self):
        cluster = table_cluster(self, {"chief": 1, "s1": 0})
        cluster.wait_for("chief", cluster.step_reached(100), 60)
        before = sum(t["rows"] for s in cluster.shell("shards")
                     for t in s["tables"])
        cluster.shell("add-shard s1")
        cluster.shell("drain shard:0")
        shards = cluster.shell("shards")
        self.assertEqual([s["node"] for s in shards], ["s1"], shards)
        # Every row made so far went along (more may have been made since).
        self.assertGreaterEqual(sum(t["rows"] for t in shards[0]["tables"]),
                                before, shards)
        log = self.finished(cluster, "py0", "py1", "s1")
        self.assertIn("shards added or drained: 2", log)


if __name__ == "__main__":
    unittest.main()
