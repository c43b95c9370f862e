"""troupe's parameter servers with your own model.

Declare the model's tensors in a safetensors file (write_parameters, e.g.
of a PyTorch module: its parameters and its buffers, such as BatchNorm's
running statistics), name it in a run config with
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
    # keywords: fresh=, resume=, epochs=, max_steps=, listen=,
    # metrics_listen=, key=, progress=fn(record), quiet=

or, for one node of a cluster file (each node a process, as with
troupe-node --node; the chief's node evaluates with evaluate=),

    troupe.run_node("cluster.json", "py0", step)  # the summary on the chief's

or, to add workers to a running cluster (troupe-node --join),

    troupe.join("HOST:PORT", step, workers=2, key="cluster.key")

gradients maps every tensor name to a float32 NumPy array or a torch
tensor of that tensor's shape: the gradient of the batch's mean loss, and
for a buffer its value after the step. With a torch module,
load_state(model, params) copies params (buffers included) into it and
step_result(model) is what a step returns after loss.backward().
Checkpoints hold the tensors under the same names (read_checkpoint: a
dict that load_state_dict(strict=True) takes; read_checkpoint(path,
table="name"): that embedding table's keys and rows).
A failure raises a subclass of troupe.Error (a RuntimeError): ConfigError
(the config, the cluster file or an argument), DataError (a file the run
reads or writes), AuthError (the cluster key or certificates), StepError
(what the step returned), TrainingError (NaN or infinite values),
ClusterError (a node lost or unreachable, too many restarts); `code` names
the kind and `exit_code` is troupe-node's exit code for it.
Embedding tables the shards hold ("tables" in the model's config) are
pulled by key for each batch: see troupe.embedding (Rows, EmbeddingBag).
epoch_order(N, seed, epoch) is the order in which
the run leases the samples (training.seed), to train a reference on the
same batches.
"""

import json
import struct
import weakref

from ._troupe import __version__, epoch_order, join, run_node, train  # noqa: F401
from ._troupe import (AuthError, ClusterError, ConfigError,  # noqa: F401
                      DataError, Error, StepError, TrainingError)
from .embedding import Rows, row_gradients  # noqa: F401
from .exports import read_export  # noqa: F401
from .ports import local_ports  # noqa: F401

__all__ = ["train", "run_node", "join", "write_parameters",
           "read_checkpoint", "read_export", "load_state", "step_result",
           "epoch_order", "local_ports",
           "Rows", "EmbeddingBag", "row_gradients",
           "Error", "ConfigError", "DataError", "AuthError", "StepError",
           "TrainingError", "ClusterError"]


def _as_numpy(value):
    import numpy as np

    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    array = np.asarray(value)  # keeps a scalar's shape ()
    return array if array.flags.c_contiguous else array.copy(order="C")


_DTYPES = {"float64": "F64", "float32": "F32", "int64": "I64",
           "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
           "bool": "BOOL"}


def _tensors_and_buffers(tensors, buffers):
    """(name -> tensor, buffer names) from a torch module or a dict."""
    if hasattr(tensors, "state_dict") and hasattr(tensors, "named_buffers"):
        module = tensors
        tensors = module.state_dict()
        named = set(name for name, _ in module.named_buffers())
        buffers = set(buffers or ()) | {n for n in tensors if n in named}
    return tensors, set(buffers or ())


def write_parameters(path, tensors, buffers=None):
    """Writes the tensors an external model declares to `path` as a
    safetensors file, in the order given.

    `tensors` is a torch module (its state_dict(): parameters and
    buffers, the module saying which is which) or a dict of name -> array
    or torch tensor. Parameters are float32 and trained by the run's
    optimizer; buffers (BatchNorm's running statistics and its int64
    num_batches_tracked, or the names in `buffers`) are set by the steps
    and travel with the parameters in their own dtype. A parameter of
    another dtype, or a buffer that is no number, is refused with its name.
    """
    tensors, buffers = _tensors_and_buffers(tensors, buffers)
    unknown = sorted(buffers - set(tensors))
    if unknown:
        raise KeyError("buffers name %s, which the tensors do not hold"
                       % ", ".join(unknown))
    # A BatchNorm's statistics named in part would be trained as
    # parameters: a model that scores nothing, silently.
    for name in sorted(buffers):
        layer = name.rsplit(".", 1)[0] + "." if "." in name else ""
        for sibling in ("running_mean", "running_var",
                        "num_batches_tracked"):
            if layer + sibling in tensors and layer + sibling not in buffers:
                raise ValueError(
                    "buffers name %s but not %s%s, a buffer of the same "
                    "layer: name every buffer, or pass the model itself "
                    "(write_parameters(path, model))"
                    % (name, layer, sibling))
    header, blobs, offset, kinds = {}, [], 0, {}
    for name, value in tensors.items():
        array = _as_numpy(value)
        dtype = _DTYPES.get(array.dtype.name)
        if name in buffers:
            if dtype is None:
                raise TypeError("buffer %s has dtype %s; a buffer is a float "
                                "or an integer" % (name, array.dtype.name))
            kinds[name] = dtype
        elif dtype != "F32":
            hint = ("pass the model itself, write_parameters(path, model), "
                    "or name every buffer in buffers=[...] (BatchNorm's "
                    "running_mean, running_var and num_batches_tracked)"
                    if dtype is not None and dtype[0] != "F" else
                    "convert it (tensor.float()), or name it in buffers=[...] "
                    "if no optimizer trains it")
            raise TypeError("tensor %s has dtype %s; troupe's shards train "
                            "float32 tensors: %s"
                            % (name, array.dtype.name, hint))
        data = array.astype(array.dtype.newbyteorder("<"),
                            copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if kinds:
        header["__metadata__"] = {"troupe.buffers": json.dumps(kinds)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for data in blobs:
            out.write(data)


def read_checkpoint(path, table=None):
    """The tensors of a troupe checkpoint as name -> NumPy array, under the
    names the run declared: parameters as float32, buffers in their own
    dtype, so that

        model.load_state_dict({k: torch.from_numpy(v) for k, v in
                               troupe.read_checkpoint(path).items()})

    loads a model whose file was written with write_parameters(path, model)
    (strict=True holds).

    With table="name", the rows of that embedding table instead: (keys, an
    int64 array (n,); values, a float32 array (n, dim)), row i of values
    being key keys[i]'s, every row the run made and no other, in no
    particular order. They are read from the table's file beside the
    checkpoint (ckpt-N.table.<name>.safetensors; a click model's is
    ckpt-N.tables.safetensors), which the checkpoint's metadata names.
    A name the checkpoint holds no table of raises KeyError naming those
    it holds."""
    import os

    import numpy as np

    def header_of(file):
        """The JSON header of safetensors file `file`, and where its data
        section begins."""
        with open(file, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            return json.loads(f.read(length)), 8 + length

    def rows_of(file):
        """(keys, values) of `table` in its file `file`
        (runtime/sparse/table_file.hpp): the ids and values tensors of
        its pieces, in file order."""
        header, base = header_of(file)
        meta = header.get("__metadata__", {})
        if meta.get("format") != "troupe-tables" or meta.get("table") != table:
            raise ValueError("%s is not a troupe table file of table %r (its "
                             "metadata says format %r, table %r)"
                             % (file, table, meta.get("format"),
                                meta.get("table")))
        dim = int(meta["dim"])
        pieces = sorted((entry["data_offsets"][0], key, entry["shape"][0])
                        for key, entry in header.items()
                        if key.endswith("/ids") or key.endswith("/values"))
        keys, values = [np.zeros(0, "<u8")], [np.zeros((0, dim), "<f4")]
        with open(file, "rb") as f:
            for begin, key, rows in pieces:
                f.seek(base + begin)
                if key.endswith("/ids"):
                    keys.append(np.fromfile(f, dtype="<u8", count=rows))
                else:
                    values.append(np.fromfile(f, dtype="<f4",
                                              count=rows * dim)
                                  .reshape(rows, dim))
        return (np.concatenate(keys).astype(np.int64),
                np.concatenate(values).astype(np.float32))

    if table is not None:
        header, _ = header_of(path)
        listed = header.get("__metadata__", {}).get("tables", "")
        files = [f for f in listed.split(",") if f]
        here = os.path.dirname(path)
        held = {}
        for name in files:
            meta, _ = header_of(os.path.join(here, name))
            held[meta.get("__metadata__", {}).get("table")] = name
        if table not in held:
            raise KeyError("%s holds no table %r; its tables: %s"
                           % (path, table,
                              ", ".join(sorted(held)) if held else "none"))
        return rows_of(os.path.join(here, held[table]))

    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    meta = header.get("__metadata__", {})
    kinds = json.loads(meta.get("troupe.buffers", "{}"))
    numpy_of = {v: k for k, v in _DTYPES.items()}
    out = {}
    for key, entry in header.items():
        if key == "__metadata__" or not key.startswith("params/"):
            continue
        begin, end = entry["data_offsets"]
        name = key[len("params/"):]
        value = np.frombuffer(data[begin:end], dtype="<f4").reshape(
            entry["shape"])
        kind = numpy_of.get(kinds.get(name), "float32")
        if kind not in ("float32", "float64", "bool"):
            value = np.rint(value)
        out[name] = np.array(value, dtype=kind)  # a copy, and 0-d stays one
    if not out:
        raise ValueError("%s is not a troupe checkpoint: it holds no params/ "
                         "tensors" % path)
    return out


class _ModelTensors:
    """A torch module's tensors by name, as load_state and step_result
    use them: `state` its state_dict(keep_vars=True) (what load_state
    writes), `grads` its named_parameters() (whose .grad step_result
    gives) and `buffers` its persistent buffers.

    Walking a module's tree for them costs more than the copies
    themselves on a small model (a tenth of a millisecond a step for an
    MLP of three layers), so they are looked up once per model, as a
    torch optimizer takes model.parameters() once. Each entry keeps the
    module and attribute that hold it: a tensor replaced since (an
    attribute set to a new parameter or buffer) is noticed on the next
    call and the lookup made again (a module added to it since is not:
    add modules before the first step, as before making an optimizer)."""

    __slots__ = ("state", "grads", "buffers", "_holders", "__weakref__")

    def __init__(self, model):
        self.state = list(model.state_dict(keep_vars=True).items())
        self.grads = list(model.named_parameters())
        declared = dict(self.state)  # persistent buffers only
        self.buffers = [(name, b) for name, b in model.named_buffers()
                        if name in declared]
        self._holders = []
        for name, tensor in self.state + self.grads:
            owner, _, attr = name.rpartition(".")
            try:
                module = model.get_submodule(owner)
            except AttributeError:
                module = None
            if module is None or not self._held(module, attr, tensor):
                # A name that a state_dict hook made: no holder to check,
                # so this model is looked up on every call.
                self._holders = None
                return
            # A weak reference: the cache, a value of a weak-keyed dict,
            # must not keep its key, the model, alive.
            self._holders.append((weakref.ref(module), attr, tensor))

    @staticmethod
    def _held(module, attr, tensor):
        return (module._parameters.get(attr) is tensor
                or module._buffers.get(attr) is tensor)

    def current(self):
        if self._holders is None:
            return False
        for ref, attr, tensor in self._holders:
            module = ref()
            if module is None or not self._held(module, attr, tensor):
                return False
        return True


_model_tensors = weakref.WeakKeyDictionary()  # module -> _ModelTensors


def _tensors_of(model):
    found = _model_tensors.get(model)
    if found is None or not found.current():
        found = _ModelTensors(model)
        _model_tensors[model] = found
    return found


def load_state(model, params):
    """Copies `params` (what a step or evaluate is given: name -> array)
    into a torch module's parameters and buffers, every name of its
    state_dict() and no other (load_state_dict's strict rule)."""
    import numpy as np
    import torch

    state = _tensors_of(model).state
    if len(params) != len(state) or any(n not in params for n, _ in state):
        names = set(n for n, _ in state)
        missing = sorted(names - set(params))
        unknown = sorted(set(params) - names)
        raise KeyError("the model and the parameters differ: "
                       + "; ".join(
                           ([("the parameters lack " + ", ".join(missing))]
                            if missing else [])
                           + ([("the model has no " + ", ".join(unknown))]
                              if unknown else [])))
    with torch.no_grad():
        for name, tensor in state:
            value = np.asarray(params[name])
            if tuple(tensor.shape) != value.shape:
                raise ValueError("%s has shape %s in the model, %s in the "
                                 "parameters" % (name, tuple(tensor.shape),
                                                 value.shape))
            if tensor.device.type == "cpu" and tensor.is_contiguous():
                tensor.detach().numpy()[...] = value
            else:
                tensor.copy_(torch.from_numpy(value.copy()))


def step_result(model, rows=None):
    """What a step returns for a torch module after its backward pass:
    each parameter's gradient and each buffer's value, by name, and with
    `rows` (the step's dict of Rows) each table's row gradients."""
    tensors = _tensors_of(model)
    out = {name: p.grad for name, p in tensors.grads}
    out.update(tensors.buffers)
    if rows:
        out.update(row_gradients(rows))
    return out


def __getattr__(name):
    # troupe.EmbeddingBag, a torch module, imports torch when first used.
    if name == "EmbeddingBag":
        from . import embedding

        return embedding.EmbeddingBag
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
