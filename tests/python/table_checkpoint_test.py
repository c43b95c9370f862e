"""An external model's embedding table in checkpoints, as a user meets it:
a NumPy model with a table "item", trained by troupe.train() with
keys=; its rows read back with troupe.read_checkpoint(path, table=...);
a resume that goes on from exactly the rows the checkpoint holds.

Run by ctest (python.table_checkpoint) with PYTHONPATH=<build>/python and
Debian's Python, which has NumPy."""

import json
import os
import tempfile
import unittest

import numpy as np

import troupe

FEATURES = 3
SAMPLES = 64
BATCH = 8
DIM = 4
VOCABULARY = 100


def user_data():
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, size=(SAMPLES, FEATURES)).astype(np.float32)
    item = (np.arange(SAMPLES) % 20 * 3 + 1).astype(np.int64)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32)
         + 0.1 * (item % 5)).astype(np.float32)
    return x, y, item


class user_model:
    """pred = x . w + b + the item's row[0]: a step that records the row
    of each key as it first sees it (what the shards held then)."""

    def __init__(self):
        self.x, self.y, self.item = user_data()
        self.first_seen = {}

    def step(self, params, samples, rows):
        r = rows["item"]
        x, y = self.x[samples], self.y[samples]
        for key, value in zip(r.unique, r.values):
            self.first_seen.setdefault(int(key), value.copy())
        used = r.values[r.inverse[:, 0], 0]
        err = x @ params["w"] + params["b"] + used - y
        n = np.float32(len(samples))
        grows = np.zeros_like(r.values)
        np.add.at(grows[:, 0], r.inverse[:, 0], err / n)
        return ({"w": (err @ x / n).astype(np.float32),
                 "b": np.float32(err.sum() / n),
                 "item": grows},
                float(0.5 * (err * err).sum()))


class TableCheckpointTest(unittest.TestCase):

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="troupe-tables-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        params = os.path.join(self.dir, "model.safetensors")
        troupe.write_parameters(params, {
            "w": np.zeros(FEATURES, dtype=np.float32),
            "b": np.zeros((), dtype=np.float32)})
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.config = os.path.join(self.dir, "run.json")
        with open(self.config, "w") as f:
            json.dump({
                "model": {"type": "external", "parameters": params,
                          "tables": [{"name": "item",
                                      "vocabulary": VOCABULARY,
                                      "dim": DIM,
                                      "optimizer": {"type": "sgd",
                                                    "learning_rate": 0.2}}]},
                "data": {"format": "external", "train_samples": SAMPLES},
                "training": {"batch_size": BATCH, "epochs": 4,
                             "optimizer": {"type": "sgd",
                                           "learning_rate": 0.1},
                             "checkpoint": {"dir": self.ckpt},
                             "log_every_steps": 100000},
                "cluster": {"workers": 1, "shards": 2,
                            "mode": "sync"}}, f)

    def checkpoint(self, step):
        return os.path.join(self.ckpt, "ckpt-%d.safetensors" % step)

    def test_a_tables_rows_are_read_back_and_a_resume_goes_on_from_them(self):
        first = user_model()
        troupe.train(self.config, first.step, keys={"item": first.item},
                     max_steps=8, quiet=True)
        path = self.checkpoint(8)
        self.assertTrue(os.path.exists(
            os.path.join(self.ckpt, "ckpt-8.table.item.safetensors")))
        keys, values = troupe.read_checkpoint(path, table="item")
        self.assertEqual(keys.dtype, np.int64)
        self.assertEqual(values.dtype, np.float32)
        # One epoch: every sample's key, and no other row.
        self.assertEqual(sorted(keys.tolist()),
                         sorted(set(first.item.tolist())))
        self.assertEqual(values.shape, (len(keys), DIM))
        for key, row in zip(keys.tolist(), values):
            start = first.first_seen[key]
            self.assertNotEqual(row[0], start[0], key)  # trained
            np.testing.assert_array_equal(row[1:], start[1:])  # no gradient
        # The dense tensors are read as before.
        dense = troupe.read_checkpoint(path)
        self.assertEqual(sorted(dense), ["b", "w"])
        with self.assertRaises(KeyError) as caught:
            troupe.read_checkpoint(path, table="user")
        self.assertIn("'user'", str(caught.exception))
        self.assertIn("its tables: item", str(caught.exception))
        # The resume pulls exactly the rows the checkpoint holds.
        resumed = user_model()
        troupe.train(self.config, resumed.step, keys={"item": resumed.item},
                     max_steps=16, quiet=True)
        saved = dict(zip(keys.tolist(), values))
        self.assertEqual(sorted(resumed.first_seen), sorted(saved))
        for key, row in resumed.first_seen.items():
            np.testing.assert_array_equal(row, saved[key], str(key))
        later_keys, later = troupe.read_checkpoint(self.checkpoint(16),
                                                   table="item")
        self.assertEqual(sorted(later_keys.tolist()), sorted(saved))
        moved = dict(zip(later_keys.tolist(), later))
        self.assertTrue(any(moved[k][0] != saved[k][0] for k in saved))


if __name__ == "__main__":
    unittest.main()
