"""What the tests of a PyTorch model on troupe's shards share
(buffers_test.py, torch_worker_test.py): torch, or None without Debian's
python3-torch; the skip of a test case that needs it (but not under
CI=..., which installs it); and a run's folder, which holds the model's
parameters and a run config that trains them as an external model with
plain SGD and keeps checkpoints."""
import json
import os
import tempfile
import unittest

import troupe

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = unittest.skipIf(torch is None and not os.environ.get("CI"),
                              "python3-torch is not installed")


class RunFolder:
    """A folder of `test`'s own (removed when it ends) with `parameters` (a
    module or a state dict, as troupe.write_parameters takes them) and
    run.json: `samples` samples a epoch in batches of `batch`, SGD at `lr`
    for `epochs` epochs, a checkpoint in ckpt, on `cluster` (the cluster
    section)."""

    def __init__(self, test, parameters, samples, batch, lr, epochs,
                 cluster):
        tmp = tempfile.TemporaryDirectory(prefix="troupe-torch-")
        test.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.params = os.path.join(self.dir, "model.safetensors")
        troupe.write_parameters(self.params, parameters)
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.config = os.path.join(self.dir, "run.json")
        with open(self.config, "w") as f:
            json.dump({
                "model": {"type": "external", "parameters": self.params},
                "data": {"format": "external", "train_samples": samples},
                "training": {"batch_size": batch, "epochs": epochs,
                             "optimizer": {"type": "sgd",
                                           "learning_rate": lr},
                             "checkpoint": {"dir": self.ckpt},
                             "log_every_steps": 100000},
                "cluster": cluster}, f)

    def newest(self):
        """The newest checkpoint, read back."""
        files = sorted(os.listdir(self.ckpt),
                       key=lambda f: int(f.split("-")[1].split(".")[0]))
        return troupe.read_checkpoint(os.path.join(self.ckpt, files[-1]))
