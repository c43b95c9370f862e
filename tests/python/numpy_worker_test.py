"""Python workers on troupe's shards, driven as a user drives them: a
NumPy model declared in a safetensors file, trained by troupe.train()
with a step function in this process; its checkpoint read back by name.

Run by ctest (python.numpy_worker) with PYTHONPATH=<build>/python and
Debian's Python, which has NumPy."""

import json
import os
import signal
import tempfile
import unittest

import numpy as np

import troupe

FEATURES = 6
SAMPLES = 400
BATCH = 8
LR = 0.1


def user_data(seed=7):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(SAMPLES, FEATURES)).astype(np.float32)
    w = np.arange(1, FEATURES + 1, dtype=np.float32)
    y = (x @ w + 0.5 + 0.01 * rng.standard_normal(SAMPLES)).astype(np.float32)
    return x, y


def gradients(w, b, x, y):
    """Mean squared error / 2 over the batch: the loss sum and the
    gradients of the mean, in float32 as the shards apply them."""
    err = x @ w[0] + b - y
    n = np.float32(len(y))
    gw = (err @ x / n).astype(np.float32).reshape(1, FEATURES)
    gb = np.float32(err.sum() / n)
    return gw, gb, float(0.5 * (err * err).sum())


def user_step(x, y):
    """The user's step function over their data x, y."""
    def step(params, samples):
        gw, gb, loss = gradients(params["linear.weight"],
                                 params["linear.bias"], x[samples],
                                 y[samples])
        return {"linear.weight": gw, "linear.bias": gb}, loss
    return step


class run_folder:
    """A run's files: the declared parameters, its config, its checkpoints."""

    def __init__(self, epochs, mode="sync", **cluster):
        self.tmp = tempfile.TemporaryDirectory(prefix="troupe-py-")
        d = self.tmp.name
        self.params = os.path.join(d, "model.safetensors")
        self.ckpt = os.path.join(d, "ckpt")
        self.w0 = np.linspace(-0.5, 0.5, FEATURES, dtype=np.float32)
        troupe.write_parameters(self.params, {
            "linear.weight": self.w0.reshape(1, FEATURES),
            "linear.bias": np.float32(0.25)})
        cfg = {
            "model": {"type": "external", "parameters": self.params},
            "data": {"format": "external", "train_samples": SAMPLES},
            "training": {"batch_size": BATCH, "epochs": epochs,
                         "optimizer": {"type": "sgd", "learning_rate": LR},
                         "checkpoint": {"dir": self.ckpt},
                         "log_every_steps": 100000},
            "cluster": dict({"mode": mode, "workers": 1,
                             "shards": 2}, **cluster),
        }
        self.config = os.path.join(d, "run.json")
        with open(self.config, "w") as f:
            json.dump(cfg, f)

    def newest_checkpoint(self):
        files = [f for f in os.listdir(self.ckpt) if f.endswith(".safetensors")
                 and ".tables." not in f]
        files.sort(key=lambda f: int(f[len("ckpt-"):-len(".safetensors")]))
        return troupe.read_checkpoint(os.path.join(self.ckpt, files[-1]))


class NumpyWorker(unittest.TestCase):
    def folder(self, **kw):
        run = run_folder(**kw)
        self.addCleanup(run.tmp.cleanup)
        return run

    def test_sync_sgd_matches_a_numpy_loop_over_the_same_batches(self):
        x, y = user_data()
        train = user_step(x, y)
        run = self.folder(epochs=200 * BATCH // SAMPLES)  # 200 steps
        batches = []

        def step(params, samples):
            self.assertFalse(params["linear.weight"].flags.writeable)
            self.assertEqual(params["linear.weight"].shape, (1, FEATURES))
            self.assertEqual(params["linear.bias"].shape, ())
            batches.append(samples.copy())
            return train(params, samples)

        summary = troupe.train(run.config, step, quiet=True)
        self.assertEqual(summary["steps"], 200)
        self.assertEqual(len(batches), 200)
        # Every sample once per epoch.
        per_epoch = SAMPLES // BATCH
        for e in range(len(batches) // per_epoch):
            seen = np.concatenate(batches[e * per_epoch:(e + 1) * per_epoch])
            self.assertTrue(np.array_equal(np.sort(seen), np.arange(SAMPLES)))
            # in the order troupe.epoch_order gives (training.seed: 1)
            np.testing.assert_array_equal(
                seen, troupe.epoch_order(SAMPLES, 1, e))
        with self.assertRaisesRegex(ValueError, "samples must be 1..2"):
            troupe.epoch_order(0, 1, 0)
        # The same batches by hand.
        w = run.w0.reshape(1, FEATURES).copy()
        b = np.float32(0.25)
        for s in batches:
            gw, gb, _ = gradients(w, b, x[s], y[s])
            w = (w - np.float32(LR) * gw).astype(np.float32)
            b = np.float32(b - np.float32(LR) * gb)
        got = run.newest_checkpoint()
        self.assertEqual(sorted(got), ["linear.bias", "linear.weight"])
        np.testing.assert_allclose(got["linear.weight"], w, rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(got["linear.bias"], b, rtol=1e-5,
                                   atol=1e-6)
        self.assertGreater(got["linear.weight"][0, -1], 5.0)  # it learned

    def test_evaluate_scores_the_run_and_ends_it_at_the_target_accuracy(self):
        x, y = user_data()
        test_x, test_y = user_data(seed=8)
        run = self.folder(epochs=50, target_accuracy=0.9,
                          metrics_dir="metrics")
        with open(run.config) as f:
            cfg = json.load(f)
        cfg["training"]["eval_every_steps"] = 25
        cfg["cluster"]["metrics_dir"] = os.path.join(run.tmp.name, "metrics")
        with open(run.config, "w") as f:
            json.dump(cfg, f)
        scores = []

        step = user_step(x, y)

        def evaluate(params):
            self.assertFalse(params["linear.weight"].flags.writeable)
            err = test_x @ params["linear.weight"][0] + \
                params["linear.bias"] - test_y
            # "accuracy": the share of predictions within 0.5.
            accuracy = float(np.mean(np.abs(err) < 0.5))
            scores.append((accuracy, params["linear.weight"].copy()))
            return accuracy, float(0.5 * np.mean(err * err)), len(test_y)

        summary = troupe.train(run.config, step, evaluate=evaluate,
                               quiet=True)
        # Ended by the target long before 50 epochs (2,500 steps).
        self.assertLess(summary["steps"], 1000)
        self.assertGreaterEqual(summary["accuracy"], 0.9)
        self.assertEqual(summary["accuracy"], scores[-1][0])
        self.assertLess(scores[0][0], 0.9)
        # The last evaluation saw the final parameters.
        np.testing.assert_array_equal(run.newest_checkpoint()["linear.weight"],
                                      scores[-1][1])
        # Every evaluation is in the run's metrics.
        metrics = os.path.join(run.tmp.name, "metrics")
        csv = [f for f in os.listdir(metrics) if f.endswith(".csv")
               and not f.endswith(".progress.csv")]
        with open(os.path.join(metrics, csv[0])) as f:
            rows = [line for line in f if line[0].isdigit()]
        self.assertEqual(len(rows), len(scores))
        self.assertAlmostEqual(float(rows[-1].split(",")[3]), scores[-1][0],
                               places=4)

    def test_an_exception_in_evaluate_ends_the_run_naming_it(self):
        x, y = user_data()
        run = self.folder(epochs=1)

        step = user_step(x, y)

        def evaluate(params):
            raise KeyError("test set")

        with self.assertRaises(troupe.StepError) as caught:
            troupe.train(run.config, step, evaluate=evaluate, quiet=True)
        self.assertIn("the evaluation at step 50 failed: the evaluate "
                      "function raised KeyError: 'test set'",
                      str(caught.exception))
        # The steps trained are kept: the run ended after a checkpoint.
        self.assertTrue(os.path.exists(
            os.path.join(run.ckpt, "ckpt-50.safetensors")), os.listdir(run.ckpt)
            if os.path.isdir(run.ckpt) else "no checkpoint folder")
        with self.assertRaises(troupe.StepError) as caught:
            troupe.train(self.folder(epochs=1).config, step,
                         evaluate=lambda p: 0.5, quiet=True)
        self.assertIn("the evaluate function returned float; it returns "
                      "(accuracy, loss)", str(caught.exception))
        with self.assertRaises(TypeError):
            troupe.train(run.config, step, evaluate=3)

    def test_a_gradient_of_the_wrong_shape_names_the_tensor_and_both_shapes(self):
        # With restarts allowed: a wrong shape comes back after every
        # restart, so the run ends at the first step.
        run = self.folder(epochs=1, max_restarts=3)
        calls = []

        def step(params, samples):
            calls.append(1)
            return {"linear.weight": np.zeros((FEATURES, 1), np.float32),
                    "linear.bias": np.float32(0)}, 0.0

        with self.assertRaises(troupe.StepError) as caught:
            troupe.train(run.config, step, quiet=True)
        self.assertIn("the gradient of linear.weight has shape (6, 1), "
                      "expected (1, 6)", str(caught.exception))
        self.assertEqual(len(calls), 1)

    def test_a_gradient_of_the_wrong_dtype_or_name_ends_the_run_at_once(self):
        for grads, text in (
                ({"linear.weight": np.zeros((1, FEATURES)),
                  "linear.bias": np.float32(0)},
                 "the gradient of linear.weight has dtype float64, "
                 "expected float32"),
                ({"linear.weight": np.zeros((1, FEATURES), np.float32),
                  "linear.bias": np.float32(0), "linear.scale": np.float32(1)},
                 "the gradients name linear.scale, which is no tensor of the "
                 "model"),
                ({"linear.weight": np.zeros((1, FEATURES), np.float32)},
                 "the gradients name no tensor linear.bias")):
            run = self.folder(epochs=1, max_restarts=3)
            calls = []

            def step(params, samples):
                calls.append(1)
                return grads, 0.0

            with self.assertRaises(troupe.StepError) as caught:
                troupe.train(run.config, step, quiet=True)
            self.assertIn(text, str(caught.exception))
            self.assertEqual(len(calls), 1, text)

    def test_an_exception_in_the_step_fails_the_run_with_its_name(self):
        run = self.folder(epochs=1, max_restarts=0)

        def step(params, samples):
            raise ValueError("the user's bug")

        with self.assertRaises(troupe.ClusterError) as caught:
            troupe.train(run.config, step, quiet=True)
        self.assertIn("ValueError: the user's bug", str(caught.exception))

    def test_an_exception_in_one_step_restarts_the_worker_and_trains_on(self):
        train = user_step(*user_data())
        run = self.folder(epochs=2)
        calls = []

        def step(params, samples):
            calls.append(samples.copy())
            if len(calls) == 30:
                raise ValueError("a passing fault")
            return train(params, samples)

        summary = troupe.train(run.config, step, quiet=True)
        self.assertEqual(summary["restarts"], 1)
        self.assertEqual(summary["steps"], 2 * SAMPLES // BATCH)
        # The failed step's lease went back: its samples trained again.
        self.assertEqual(len(calls), 2 * SAMPLES // BATCH + 1)
        first_epoch = np.concatenate(calls[:SAMPLES // BATCH + 1])
        self.assertEqual(len(set(first_epoch.tolist())), SAMPLES)

    def test_a_nan_loss_stops_the_run(self):
        run = self.folder(epochs=1)

        def step(params, samples):
            return {"linear.weight": np.zeros((1, FEATURES), np.float32),
                    "linear.bias": np.float32(0)}, float("nan")

        with self.assertRaises(troupe.TrainingError) as caught:
            troupe.train(run.config, step, quiet=True)
        self.assertIn("the loss turned NaN", str(caught.exception))

    def test_ctrl_c_stops_the_run_with_a_checkpoint_and_raises(self):
        train = user_step(*user_data())
        run = self.folder(epochs=1000)  # 50,000 steps: stopped long before
        calls = []

        def step(params, samples):
            calls.append(1)
            if len(calls) == 20:
                os.kill(os.getpid(), signal.SIGINT)
            return train(params, samples)

        with self.assertRaises(KeyboardInterrupt):
            troupe.train(run.config, step, quiet=True)
        self.assertLess(len(calls), 10000)
        # The chief wound the run down and wrote its last checkpoint.
        got = run.newest_checkpoint()
        self.assertEqual(sorted(got), ["linear.bias", "linear.weight"])

    def test_a_parameters_file_that_is_not_there_is_named(self):
        run = self.folder(epochs=1)
        os.remove(run.params)
        with self.assertRaises(troupe.DataError) as caught:
            troupe.train(run.config, lambda p, s: None, quiet=True)
        self.assertIn("/model/parameters: " + run.params + ": no such file",
                      str(caught.exception))

    def test_a_model_troupe_computes_is_refused_with_its_type(self):
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "run.json")
            with open(config, "w") as f:
                json.dump({"model": {"type": "mlp"},
                           "data": {"format": "synthetic"}}, f)
            for call in (lambda: troupe.train(config, lambda p, s: None),
                         lambda: troupe.run_node(config, "py",
                                                 lambda p, s: None)):
                with self.assertRaises(troupe.ConfigError) as caught:
                    call()
                self.assertIn("/model/type: ", str(caught.exception))
                self.assertIn("runs workers whose step is a Python function "
                              "(\"external\"); troupe-node trains \"mlp\" "
                              "itself", str(caught.exception))
            with self.assertRaises(TypeError):
                troupe.train(config, 42)

    def test_a_parameter_troupe_cannot_hold_is_refused_when_written(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(TypeError) as caught:
                troupe.write_parameters(os.path.join(d, "m.safetensors"), {
                    "bn.num_batches_tracked": np.array(0, np.int64)})
            self.assertIn("bn.num_batches_tracked has dtype int64",
                          str(caught.exception))
            self.assertIn("buffers=[...]", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
