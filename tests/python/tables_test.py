"""Embedding tables of a PyTorch model on troupe's shards, driven as a user
drives them: a model whose bags are troupe.EmbeddingBag, its tables in the
run config, each sample's keys given to troupe.train(keys=...), and a
step that returns the rows' gradients beside the dense ones; and the
errors a user meets: a key outside its table, a gradient of the wrong
shape or dtype, keys for a table the model has not.

Run by ctest (python.tables) with PYTHONPATH=<build>/python and Debian's
Python (numpy, torch)."""

import json
import os
import tempfile
import unittest

import numpy as np

import troupe
from torch_runs import needs_torch, torch

SAMPLES = 1200
VOCAB = 40
DIM = 4


def planted(seed=5):
    """Samples of two fields (one key, and a bag of up to 3 keys, -1
    padded) whose click follows planted per-key weights."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, VOCAB, size=(SAMPLES, 1))
    items = rng.integers(0, VOCAB, size=(SAMPLES, 3))
    items[rng.random((SAMPLES, 3)) < 0.3] = -1
    items[:, 0] = np.abs(items[:, 0])  # every bag holds a key
    w = rng.normal(size=VOCAB)
    score = w[user[:, 0]] + np.where(items >= 0, w[items], 0).sum(1)
    y = (score > 0).astype(np.float32)
    return {"user": user, "item": items}, y


def make_model():
    torch.manual_seed(1)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.out = torch.nn.Linear(2 * DIM, 1)
            self.user = troupe.EmbeddingBag("user", mode="sum")
            self.item = troupe.EmbeddingBag("item", mode="mean")

        def forward(self, rows):
            x = torch.cat([self.user(rows), self.item(rows)], dim=1)
            return self.out(x).squeeze(1)
    return Model()


class Folder:
    def __init__(self, test, model, mode="async", tables=None, **training):
        tmp = tempfile.TemporaryDirectory(prefix="troupe-tables-")
        test.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        params = os.path.join(self.dir, "model.safetensors")
        troupe.write_parameters(params, model)
        self.config = os.path.join(self.dir, "run.json")
        tables = tables or [
            {"name": "user", "vocabulary": VOCAB, "dim": DIM,
             "optimizer": {"type": "adagrad", "learning_rate": 0.2}},
            {"name": "item", "vocabulary": VOCAB, "dim": DIM,
             "optimizer": {"type": "adam", "learning_rate": 0.05}}]
        with open(self.config, "w") as f:
            json.dump({
                "model": {"type": "external", "parameters": params,
                          "tables": tables},
                "data": {"format": "external", "train_samples": SAMPLES},
                "training": dict({"batch_size": 40, "epochs": 4,
                                  "log_every_steps": 100000,
                                  "optimizer": {"type": "adam",
                                                "learning_rate": 0.02}},
                                 **training),
                "cluster": {"mode": mode, "workers": 2, "shards": 2}}, f)


def bce_step(model, y, losses=None, change=None):
    """The user's step; `change(grads, rows)` spoils what it returns."""
    def step(params, samples, rows):
        troupe.load_state(model, params)
        model.zero_grad()
        out = model(rows)
        target = torch.from_numpy(y[samples])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            out, target)
        loss.backward()
        if losses is not None:
            losses.append(loss.item())
        grads = troupe.step_result(model, rows)
        if change:
            change(grads, rows)
        return grads, loss.item() * len(samples)
    return step


@needs_torch
class Tables(unittest.TestCase):
    def train(self, folder, step, keys, **kw):
        return troupe.train(folder.config, step, keys=keys, quiet=True, **kw)

    def test_rows_pulled_and_pushed_train_the_model_in_every_mode(self):
        keys, y = planted()
        for mode in ("async", "sync", "ssp"):
            with self.subTest(mode=mode):
                model = make_model()
                folder = Folder(self, model, mode)
                losses = []
                summary = self.train(folder, bce_step(model, y, losses), keys)
                self.assertEqual(summary["epochs"], 4.0)
                first = np.mean(losses[:10])
                last = np.mean(losses[-10:])
                # The planted rule is a sum of per-key weights: the tables
                # learn it, the 8 dense weights alone could not.
                self.assertLess(last, 0.6 * first, (mode, first, last))

    def test_a_step_sees_the_batch_keys_and_distinct_rows(self):
        keys, y = planted()
        model = make_model()
        folder = Folder(self, model, mode="sync", max_steps=3)
        seen = []

        def step(params, samples, rows):
            for name in ("user", "item"):
                r = rows[name]
                seen.append(name)
                np.testing.assert_array_equal(r.keys, keys[name][samples])
                self.assertEqual(len(set(r.unique.tolist())), len(r.unique))
                used = r.keys >= 0
                np.testing.assert_array_equal(r.unique[r.inverse[used]],
                                              r.keys[used])
                self.assertTrue((r.inverse[~used] == -1).all())
                self.assertEqual(r.values.shape, (len(r.unique), DIM))
                self.assertEqual(r.values.dtype, np.float32)
                # Rows start uniform in [-init_scale, init_scale].
                if len(seen) <= 2:
                    self.assertLessEqual(float(np.abs(r.values).max()), 0.05)
                # torch takes them without a copy.
                t = r.tensor()
                self.assertEqual(t.data_ptr(),
                                 r.values.__array_interface__["data"][0])
            return bce_step(model, y)(params, samples, rows)
        self.train(folder, step, keys)
        self.assertGreaterEqual(len(seen), 6)

    def test_with_prefetch_each_step_gets_its_own_batchs_rows(self):
        # The next batch's lease and rows come while a step computes on the
        # worker's own thread: each step still gets the rows of its own
        # samples, and every batch is trained once.
        keys, y = planted()
        model = make_model()
        folder = Folder(self, model, mode="async")
        with open(folder.config) as f:
            cfg = json.load(f)
        cfg["cluster"]["prefetch"] = True
        with open(folder.config, "w") as f:
            json.dump(cfg, f)
        seen, losses = [], []
        inner = bce_step(model, y, losses)

        def step(params, samples, rows):
            for name in ("user", "item"):
                np.testing.assert_array_equal(rows[name].keys,
                                              keys[name][samples])
            seen.extend(samples.tolist())
            return inner(params, samples, rows)
        summary = self.train(folder, step, keys)
        self.assertEqual(summary["steps"], 4 * SAMPLES // 40)
        self.assertEqual(sorted(seen), sorted(list(range(SAMPLES)) * 4))
        self.assertLess(np.mean(losses[-10:]), 0.6 * np.mean(losses[:10]))

    def test_keys_from_a_function_of_the_batch(self):
        # keys(samples) -> the batch's keys alone trains as the arrays do.
        keys, y = planted()
        results = []
        for given in (keys, lambda samples: {n: k[samples]
                                             for n, k in keys.items()}):
            model = make_model()
            folder = Folder(self, model, mode="sync", max_steps=20)
            losses = []
            self.train(folder, bce_step(model, y, losses), given)
            results.append(sorted(losses))
        self.assertEqual(results[0], results[1])
        model = make_model()
        folder = Folder(self, model, max_steps=5)

        def broken(samples):
            raise KeyError("no such file")
        with self.assertRaises(troupe.ClusterError) as caught:
            self.train(folder, bce_step(model, y), broken)
        self.assertIn("the keys function raised KeyError", str(caught.exception))

    def test_a_batch_without_keys_gets_empty_rows(self):
        keys, y = planted()
        none = {n: np.full_like(k, -1) for n, k in keys.items()}
        model = make_model()
        folder = Folder(self, model, max_steps=4)
        seen = []

        def step(params, samples, rows):
            seen.append({n: r.values.shape for n, r in rows.items()})
            return bce_step(model, y)(params, samples, rows)
        self.train(folder, step, none)
        self.assertEqual(seen[0], {"user": (0, DIM), "item": (0, DIM)})

    def test_per_occurrence_gradients_are_summed_per_key(self):
        # A step that returns (samples, width, dim) gradients trains as
        # one that returns them per distinct key.
        keys, y = planted()
        results = []
        for per_use in (False, True):
            model = make_model()
            folder = Folder(self, model, mode="sync", max_steps=20)

            def change(grads, rows, per_use=per_use):
                if not per_use:
                    return
                for name, r in rows.items():
                    g = grads[name].numpy()
                    occ = np.zeros(r.keys.shape + (DIM,), np.float32)
                    # Each key's gradient on its first use, zeros after:
                    # summed, the per-key gradient again.
                    first = {}
                    for i, j in zip(*np.nonzero(r.inverse >= 0)):
                        u = r.inverse[i, j]
                        if u not in first:
                            first[u] = True
                            occ[i, j] = g[u]
                    grads[name] = occ
            losses = []
            self.train(folder, bce_step(model, y, losses, change), keys)
            results.append(losses)
        # Two sync workers per step: the same losses, in either order.
        self.assertEqual(sorted(results[0]), sorted(results[1]))

    def test_bad_keys_and_row_gradients_end_the_run_naming_the_table(self):
        keys, y = planted()
        cases = []
        bad = dict(keys, item=keys["item"].copy())
        bad["item"][17, 1] = VOCAB + 3
        # The sample as the user numbers it, not its place in the batch.
        cases.append((bad, None, "table item: key 43 of sample 17 is "
                                 "outside the table's vocabulary [0, 40)"))
        neg = dict(keys, user=keys["user"] - 5)
        cases.append((neg, None, "table user: key -"))

        def shape(grads, rows):
            grads["user"] = grads["user"][:, :2]
        cases.append((keys, shape, "the gradient of table user has shape"))

        def dtype(grads, rows):
            grads["item"] = grads["item"].double()
        cases.append((keys, dtype, "the gradient of table item has dtype "
                                   "float64, expected float32"))

        def missing(grads, rows):
            del grads["item"]
        cases.append((keys, missing, "the gradients name no table item"))
        for given, change, text in cases:
            with self.subTest(text=text):
                model = make_model()
                folder = Folder(self, model)
                with self.assertRaises(troupe.StepError) as caught:
                    self.train(folder, bce_step(model, y, change=change),
                               given)
                self.assertIn(text, str(caught.exception))

    def test_keys_that_do_not_fit_the_tables_are_refused_before_the_run(self):
        keys, y = planted()
        model = make_model()
        folder = Folder(self, model)
        step = bce_step(model, y)
        cases = [
            (None, "the model has embedding tables (/model/tables); keys= "
                   "says which rows each sample uses"),
            (dict(keys, extra=keys["user"]),
             "keys= names table \"extra\", which /model/tables does not "
             "declare"),
            ({"user": keys["user"]}, "keys= gives no keys for table \"item\""),
            (dict(keys, user=keys["user"][:100]),
             "keys[\"user\"] has 100 rows for 1200 training samples"),
        ]
        for given, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(troupe.ConfigError) as caught:
                    self.train(folder, step, given)
                self.assertIn(text, str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            self.train(folder, step, dict(keys, user=keys["user"] * 0.5))
        self.assertIn("keys[\"user\"]: expected integers", str(caught.exception))

    def test_a_table_named_as_a_tensor_is_refused(self):
        keys, y = planted()
        model = make_model()
        folder = Folder(self, model, tables=[
            {"name": "user", "vocabulary": VOCAB, "dim": DIM},
            {"name": "out.bias", "vocabulary": VOCAB, "dim": DIM}])
        with self.assertRaises(troupe.StepError) as caught:
            self.train(folder, bce_step(model, y),
                       {"user": keys["user"], "out.bias": keys["item"]})
        self.assertIn("table out.bias has the name of a tensor of the model",
                      str(caught.exception))


if __name__ == "__main__":
    unittest.main()
