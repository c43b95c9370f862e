"""troupe's parameter servers with your own model.

Declare the model's tensors in a safetensors file (write_parameters, e.g.
from a PyTorch model's state_dict()), name it in a run config with
"model": {"type": "external", "parameters": FILE} and
"data": {"format": "external", "train_samples": N}, and train:

    def step(params, samples):
        # params: tensor name -> read-only float32 NumPy array (the values
        #         pulled from the shards); samples: int64 indices into
        #         your N training samples, each once per epoch.
        ...
        return gradients, loss_sum     # or (gradients, loss_sum, hits)

    def evaluate(params):               # optional: on your test set
        ...
        return accuracy, loss

    summary = troupe.train("run.json", step, evaluate=evaluate)

or, for one node of a cluster file (each node a process, as with
troupe-node --node; the chief's node evaluates with evaluate=),

    troupe.run_node("cluster.json", "py0", step)  # troupe-node's exit code

or, to add workers to a running cluster (troupe-node --join),

    troupe.join("HOST:PORT", step, workers=2, key="cluster.key")

gradients maps every tensor name to a float32 NumPy array or a torch
tensor of that tensor's shape: the gradient of the batch's mean loss.
Checkpoints hold the tensors under the same names (read_checkpoint).
The tensors are dense: rows of sparse embedding tables cannot be pulled
or pushed from Python. epoch_order(N, seed, epoch) is the order in which
the run leases the samples (training.seed), to train a reference on the
same batches.
"""

import json
import struct

from ._troupe import epoch_order, join, run_node, train  # noqa: F401

__all__ = ["train", "run_node", "join", "write_parameters",
           "read_checkpoint", "epoch_order"]


def _as_numpy(value):
    import numpy as np

    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    array = np.asarray(value)  # keeps a scalar's shape ()
    return array if array.flags.c_contiguous else array.copy(order="C")


def write_parameters(path, tensors):
    """Writes `tensors` (name -> array or torch tensor, float32) to `path`
    as a safetensors file, in the order given: the parameters an external
    model declares. A tensor of another dtype is refused with its name."""
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        array = _as_numpy(value)
        if array.dtype.name != "float32":
            raise TypeError(
                f"tensor {name} has dtype {array.dtype.name}; troupe's shards "
                "hold float32 tensors (convert it, or leave it out)")
        data = array.astype("<f4", copy=False).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for data in blobs:
            out.write(data)


def read_checkpoint(path):
    """The parameters of a troupe checkpoint as name -> float32 NumPy
    array, under the names the run declared (load them into a PyTorch
    model with {k: torch.from_numpy(v) for k, v in ...})."""
    import numpy as np

    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    out = {}
    for key, entry in header.items():
        if key == "__metadata__" or not key.startswith("params/"):
            continue
        begin, end = entry["data_offsets"]
        out[key[len("params/"):]] = np.frombuffer(
            data[begin:end], dtype="<f4").reshape(entry["shape"]).copy()
    return out
