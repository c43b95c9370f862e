"""A PyTorch model on troupe's shards: autograd computes the gradients in
the step function, troupe's shards apply them. One worker in sync mode
with plain SGD ends where torch.optim.SGD ends over the same batches.

Run by ctest (python.torch_worker) with Debian's Python, which has
python3-torch; without torch it says so and skips (CI installs it)."""

import os
import tempfile
import unittest

import numpy as np

import troupe
from torch_runs import RunFolder, needs_torch, torch

SAMPLES, FEATURES, BATCH, LR = 320, 6, 16, 0.05


def make_model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 1))


@needs_torch
class TorchWorker(unittest.TestCase):
    def test_sync_sgd_matches_torch_sgd_over_the_same_batches(self):
        rng = np.random.default_rng(11)
        x = torch.from_numpy(
            rng.uniform(-1, 1, (SAMPLES, FEATURES)).astype(np.float32))
        y = torch.sin(x.sum(dim=1, keepdim=True))
        model = make_model()
        steps = 200
        run = RunFolder(self, model.state_dict(), SAMPLES, BATCH, LR,
                        steps * BATCH // SAMPLES,
                        {"mode": "sync", "workers": 1, "shards": 2})
        batches = []

        def step(values, samples):
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(torch.tensor(values[name]))
            model.zero_grad()
            batch = torch.from_numpy(samples)
            loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
            loss.backward()
            batches.append(samples.copy())
            grads = {name: p.grad for name, p in model.named_parameters()}
            return grads, loss.item() * len(samples)

        summary = troupe.train(run.config, step, quiet=True)
        self.assertEqual(summary["steps"], steps)
        # The same batches with torch alone.
        reference = make_model()
        opt = torch.optim.SGD(reference.parameters(), lr=LR)
        for s in batches:
            opt.zero_grad()
            batch = torch.from_numpy(s)
            torch.nn.functional.mse_loss(reference(x[batch]),
                                         y[batch]).backward()
            opt.step()
        got = run.newest()
        want = reference.state_dict()
        self.assertEqual(sorted(got), sorted(want))
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value.numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=name)
        # It loads straight back into the model.
        model.load_state_dict({k: torch.from_numpy(v) for k, v in got.items()})

    def test_the_docs_example_trains(self):
        """docs/training.md's example, run as a user would copy it."""
        page = open(os.path.join(os.path.dirname(__file__), "..", "..",
                                 "docs", "training.md")).read()
        section = page[page.index("## Your own model"):]
        begin = section.index("```python\n") + len("```python\n")
        code = section[begin:section.index("```", begin)]
        tmp = tempfile.TemporaryDirectory(prefix="troupe-doc-")
        self.addCleanup(tmp.cleanup)
        here = os.getcwd()
        os.chdir(tmp.name)
        self.addCleanup(os.chdir, here)
        code = code.replace("print(troupe.train(", "summary = (troupe.train(")
        code = code.replace('"run.json", step))', '"run.json", step, quiet=True))')
        scope = {}
        exec(compile(code, "docs/training.md", "exec"), scope)
        self.assertEqual(scope["summary"]["steps"], 5 * 32)  # 31 full batches and a last short one per epoch
        self.assertEqual(scope["summary"]["restarts"], 0)
        self.assertTrue(os.listdir(os.path.join(tmp.name, "ckpt")))


if __name__ == "__main__":
    unittest.main()
