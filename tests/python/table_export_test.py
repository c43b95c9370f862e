"""Exports of an external model's table for serving, as a user meets them:
a NumPy model with a table "item" whose rows live only a few steps,
trained by troupe.train() with training.export every 3 steps; the folder's
manifest names a full export and then deltas (changed rows and evicted
keys); troupe.read_export gives, at the last export, exactly the rows of
the final checkpoint (the same step), and at every earlier one a table
that changed; a manifest with a delta left out is refused, naming the file.

Run by ctest (python.table_export) with PYTHONPATH=<build>/python and
Debian's Python, which has NumPy."""

import json
import os
import tempfile
import unittest

import numpy as np

import troupe

FEATURES = 3
SAMPLES = 96
BATCH = 8
DIM = 4


def user_data():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, size=(SAMPLES, FEATURES)).astype(np.float32)
    # Keys that drift through the epoch: each is in a few batches only.
    item = (np.arange(SAMPLES) // 3 + 7).astype(np.int64)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32)
         + 0.1 * (item % 5)).astype(np.float32)
    return x, y, item


def step(params, samples, rows):
    x, y, _ = user_data()
    r = rows["item"]
    x, y = x[samples], y[samples]
    used = r.values[r.inverse[:, 0], 0]
    err = x @ params["w"] + params["b"] + used - y
    n = np.float32(len(samples))
    grows = np.zeros_like(r.values)
    np.add.at(grows[:, 0], r.inverse[:, 0], err / n)
    return ({"w": (err @ x / n).astype(np.float32),
             "b": np.float32(err.sum() / n),
             "item": grows},
            float(0.5 * (err * err).sum()))


class TableExportTest(unittest.TestCase):

    def setUp(self):
        self.evict = {"steps_to_live": 4}
        tmp = tempfile.TemporaryDirectory(prefix="troupe-exports-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        params = os.path.join(self.dir, "model.safetensors")
        troupe.write_parameters(params, {
            "w": np.zeros(FEATURES, dtype=np.float32),
            "b": np.zeros((), dtype=np.float32)})
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.exports = os.path.join(self.dir, "exports")
        self.config = os.path.join(self.dir, "run.json")
        self.params = params

    def write_config(self):
        params = self.params
        table = {"name": "item", "vocabulary": 1000, "dim": DIM,
                 "optimizer": {"type": "adagrad", "learning_rate": 0.2}}
        if self.evict:
            table["evict"] = self.evict
        with open(self.config, "w") as f:
            json.dump({
                "model": {"type": "external", "parameters": params,
                          "tables": [table]},
                "data": {"format": "external", "train_samples": SAMPLES},
                "training": {"batch_size": BATCH, "epochs": 2,
                             "shuffle_block": SAMPLES,
                             "optimizer": {"type": "sgd",
                                           "learning_rate": 0.1},
                             "checkpoint": {"dir": self.ckpt},
                             "export": {"dir": self.exports,
                                        "every_steps": 3},
                             "log_every_steps": 1},
                "cluster": {"workers": 1, "shards": 2,
                            "mode": "sync"}}, f)

    def test_without_eviction_too(self):
        # Rows keep their ages for the exports alone: the checkpoint holds
        # them, and the last export is still its table.
        self.evict = None
        self.write_config()
        _, _, item = user_data()
        troupe.train(self.config, step, keys={"item": item}, quiet=True)
        with open(os.path.join(self.exports, "manifest.json")) as f:
            last = json.load(f)["exports"][-1]
        self.assertEqual(last["evicted"], 0)
        keys, values = troupe.read_export(self.exports, "item")
        ckpt = os.path.join(self.ckpt, "ckpt-%d.safetensors" % last["step"])
        held_keys, held = troupe.read_checkpoint(ckpt, table="item")
        order = np.argsort(held_keys)
        np.testing.assert_array_equal(keys, held_keys[order])
        self.assertEqual(values.tobytes(), held[order].tobytes())

    def test_the_last_export_is_the_final_checkpoints_table(self):
        self.write_config()
        _, _, item = user_data()
        troupe.train(self.config, step, keys={"item": item}, quiet=True)
        with open(os.path.join(self.exports, "manifest.json")) as f:
            exports = json.load(f)["exports"]
        kinds = [e["kind"] for e in exports]
        self.assertEqual(kinds[0], "full")
        self.assertEqual(set(kinds[1:]), {"delta"})
        self.assertGreaterEqual(len(exports), 5)
        self.assertGreater(sum(e["evicted"] for e in exports), 0)
        last = exports[-1]
        keys, values = troupe.read_export(self.exports, "item")
        self.assertEqual(keys.dtype, np.int64)
        self.assertEqual(values.dtype, np.float32)
        ckpt = os.path.join(self.ckpt, "ckpt-%d.safetensors" % last["step"])
        held_keys, held = troupe.read_checkpoint(ckpt, table="item")
        order = np.argsort(held_keys)
        np.testing.assert_array_equal(keys, held_keys[order])
        self.assertEqual(values.tobytes(), held[order].tobytes())
        # Each earlier export reads as a table of its own, and the keys
        # drift: some are gone by the last one (evicted, not kept).
        seen = set()
        for e in exports:
            k, v = troupe.read_export(self.exports, "item", upto=e["sequence"])
            self.assertEqual(v.shape, (len(k), DIM))
            seen |= set(k.tolist())
        self.assertTrue(seen - set(keys.tolist()))
        with self.assertRaises(KeyError):
            troupe.read_export(self.exports, "user")
        # A delta left out of the manifest: the one after it is refused.
        with open(os.path.join(self.exports, "manifest.json")) as f:
            manifest = json.load(f)
        del manifest["exports"][1]
        with open(os.path.join(self.exports, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        with self.assertRaises(ValueError) as caught:
            troupe.read_export(self.exports, "item")
        self.assertIn("export-2.table.item.safetensors", str(caught.exception))
        self.assertIn("does not follow", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
