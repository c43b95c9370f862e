"""A PyTorch model with buffers (BatchNorm's running statistics and its
int64 num_batches_tracked) on troupe's shards, as a user writes it: the
module itself declared with write_parameters(path, model), the step
loading parameters and buffers with troupe.load_state and returning
troupe.step_result. One worker in sync mode with plain SGD ends where
PyTorch alone ends, buffers included; two async workers add up every
step's change; the checkpoint loads with load_state_dict(strict=True)
and scores as the chief's evaluate said. What a user gets wrong is named.

Run by ctest (python.buffers) with Debian's Python, which has
python3-torch; without torch it says so and skips (CI installs it)."""

import os
import tempfile
import unittest

import numpy as np

import troupe
from torch_runs import RunFolder, needs_torch, torch

SAMPLES, FEATURES, BATCH, LR = 256, 6, 16, 0.05


def make_model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 8),
                               torch.nn.BatchNorm1d(8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 1))


def user_data():
    rng = np.random.default_rng(3)
    x = torch.from_numpy(
        rng.uniform(-1, 1, (SAMPLES, FEATURES)).astype(np.float32))
    return x, torch.sin(x.sum(dim=1, keepdim=True)) * 2 + 1


def run_folder(test, model, mode, workers, epochs):
    """The module itself declared, buffers and all, on three shards."""
    return RunFolder(test, model, SAMPLES, BATCH, LR, epochs,
                     {"mode": mode, "workers": workers, "shards": 3})


def mse_step(model, x, y, batches=None):
    def step(params, samples):
        troupe.load_state(model, params)
        model.train()
        model.zero_grad()
        i = torch.from_numpy(samples)
        loss = torch.nn.functional.mse_loss(model(x[i]), y[i])
        loss.backward()
        if batches is not None:
            batches.append(samples.copy())
        return troupe.step_result(model), loss.item() * len(samples)
    return step


@needs_torch
class Buffers(unittest.TestCase):
    def test_sync_sgd_with_batchnorm_matches_pytorch_buffers_included(self):
        x, y = user_data()
        model = make_model()
        run = run_folder(self, model, "sync", 1, 4)
        batches, scores = [], []

        def evaluate(params):
            troupe.load_state(model, params)
            model.eval()  # the running statistics, not the batch's
            with torch.no_grad():
                loss = torch.nn.functional.mse_loss(model(x), y).item()
            scores.append(loss)
            return -loss, loss

        summary = troupe.train(run.config, mse_step(model, x, y, batches),
                               evaluate=evaluate, quiet=True)
        self.assertEqual(summary["steps"], 4 * SAMPLES // BATCH)
        reference = make_model()
        opt = torch.optim.SGD(reference.parameters(), lr=LR)
        reference.train()
        for s in batches:
            opt.zero_grad()
            i = torch.from_numpy(s)
            torch.nn.functional.mse_loss(reference(x[i]), y[i]).backward()
            opt.step()
        got = run.newest()
        want = reference.state_dict()
        self.assertEqual(sorted(got), sorted(want))
        for name, value in want.items():
            self.assertEqual(got[name].dtype, value.numpy().dtype, name)
            np.testing.assert_allclose(got[name], value.numpy(), rtol=2e-5,
                                       atol=2e-6, err_msg=name)
        self.assertEqual(int(got["1.num_batches_tracked"]), len(batches))
        self.assertGreater(float(got["1.running_var"].min()), 0)
        # The checkpoint loads strictly into a fresh module and scores as
        # the chief's last evaluation did, with the running statistics.
        fresh = make_model()
        fresh.load_state_dict({k: torch.from_numpy(v) for k, v in
                               got.items()}, strict=True)
        fresh.eval()
        with torch.no_grad():
            loss = torch.nn.functional.mse_loss(fresh(x), y).item()
        self.assertAlmostEqual(loss, scores[-1], places=5)
        self.assertAlmostEqual(summary["loss"], scores[-1], places=5)

    def test_async_workers_add_up_each_steps_change_of_a_buffer(self):
        x, y = user_data()
        model = make_model()
        run = run_folder(self, model, "async", 2, 3)
        summary = troupe.train(run.config, mse_step(model, x, y), quiet=True)
        got = run.newest()
        # Every step added its +1, whichever worker took it and however
        # stale its values were.
        self.assertEqual(int(got["1.num_batches_tracked"]), summary["steps"])
        self.assertEqual(summary["steps"], 3 * SAMPLES // BATCH)
        # The running mean followed the data: the initial 0 is gone.
        self.assertGreater(float(np.abs(got["1.running_mean"]).max()), 0.01)

    def test_a_state_dict_with_buffers_is_refused_with_the_way_out(self):
        model = make_model()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            with self.assertRaises(TypeError) as caught:
                troupe.write_parameters(path, model.state_dict())
            self.assertIn("tensor 1.num_batches_tracked has dtype int64",
                          str(caught.exception))
            self.assertIn("write_parameters(path, model)",
                          str(caught.exception))
            self.assertIn("name every buffer", str(caught.exception))
            # Naming the counter alone would train the statistics as
            # parameters: refused, naming the one left out.
            with self.assertRaises(ValueError) as caught:
                troupe.write_parameters(path, model.state_dict(),
                                        buffers=["1.num_batches_tracked"])
            self.assertIn("but not 1.running_mean, a buffer of the same "
                          "layer", str(caught.exception))
            # A parameters file is no checkpoint.
            troupe.write_parameters(path, model)
            with self.assertRaises(ValueError) as caught:
                troupe.read_checkpoint(path)
            self.assertIn("is not a troupe checkpoint", str(caught.exception))
            # The same dict with its buffers named is taken.
            troupe.write_parameters(path, model.state_dict(), buffers=[
                "1.running_mean", "1.running_var", "1.num_batches_tracked"])
            with self.assertRaises(KeyError) as caught:
                troupe.write_parameters(path, model.state_dict(),
                                        buffers=["1.running_average"])
            self.assertIn("1.running_average", str(caught.exception))

    def test_a_step_that_forgets_the_buffers_ends_the_run_at_once(self):
        x, y = user_data()
        model = make_model()
        run = run_folder(self, model, "async", 1, 1)
        calls = []

        def step(params, samples):
            calls.append(1)
            troupe.load_state(model, params)
            model.zero_grad()
            i = torch.from_numpy(samples)
            loss = torch.nn.functional.mse_loss(model(x[i]), y[i])
            loss.backward()
            grads = {n: p.grad for n, p in model.named_parameters()}
            return grads, loss.item() * len(samples)

        with self.assertRaises(troupe.StepError) as caught:
            troupe.train(run.config, step, quiet=True)
        self.assertIn("the gradients give no value for buffer "
                      "1.running_mean", str(caught.exception))
        self.assertIn("dict(model.named_buffers())", str(caught.exception))
        # A restart would fail alike: the run ended on the first step.
        self.assertEqual(len(calls), 1)

    def test_a_buffer_of_the_wrong_shape_is_named(self):
        x, y = user_data()
        model = make_model()
        run = run_folder(self, model, "async", 1, 1)

        def step(params, samples):
            out = mse_step(model, x, y)(params, samples)
            out[0]["1.running_var"] = np.ones((2, 8), np.float32)
            return out

        with self.assertRaises(troupe.StepError) as caught:
            troupe.train(run.config, step, quiet=True)
        self.assertIn("the value of buffer 1.running_var has shape (2, 8), "
                      "expected (8,)", str(caught.exception))

    def test_load_state_follows_a_tensor_replaced_between_steps(self):
        # load_state and step_result look a model's tensors up once; a
        # parameter or buffer set anew after that must still be the one
        # they write and read.
        import gc
        import weakref

        model = make_model()
        params = {k: v.detach().numpy().copy() + 1
                  for k, v in model.state_dict().items()}
        troupe.load_state(model, params)
        model[0].weight = torch.nn.Parameter(torch.zeros(8, FEATURES))
        model[1].running_mean = torch.zeros(8)
        troupe.load_state(model, params)
        np.testing.assert_array_equal(model[0].weight.detach().numpy(),
                                      params["0.weight"])
        np.testing.assert_array_equal(model[1].running_mean.numpy(),
                                      params["1.running_mean"])
        model[0].weight.grad = torch.ones(8, FEATURES)
        got = troupe.step_result(model)
        self.assertIs(got["0.weight"], model[0].weight.grad)
        self.assertIs(got["1.running_mean"], model[1].running_mean)
        self.assertEqual(set(got), set(params))
        # The parameters must still match the model's names, every time.
        with self.assertRaises(KeyError) as caught:
            troupe.load_state(model, {k: v for k, v in params.items()
                                      if k != "3.bias"})
        self.assertIn("the parameters lack 3.bias", str(caught.exception))
        # Looked up once, not kept alive by it.
        gone = weakref.ref(model)
        del model
        gc.collect()
        self.assertIsNone(gone())


if __name__ == "__main__":
    unittest.main()
