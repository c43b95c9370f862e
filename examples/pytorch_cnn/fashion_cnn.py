"""The model and the data of the example: a PyTorch CNN with dropout and,
if asked, batch normalization (a model troupe does not have built in) and
Fashion-MNIST read with NumPy; and the options of a run.
train.py trains it on troupe; alone.py trains it with PyTorch alone."""

import gzip
import os
import struct
from collections import OrderedDict

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"


def make_model(seed=1, batchnorm=False, dropout=0.25):
    """The CNN; with `batchnorm`, batch normalization after each
    convolution and the hidden dense layer (its running statistics are
    buffers, which troupe carries beside the parameters)."""
    torch.manual_seed(seed)

    def norm(name, layer):
        return [(name, layer)] if batchnorm else []
    return nn.Sequential(OrderedDict(
        [("conv1", nn.Conv2d(1, 16, 3, padding=1))]
        + norm("bn1", nn.BatchNorm2d(16))
        + [("relu1", nn.ReLU()), ("pool1", nn.MaxPool2d(2)),   # 16 x 14 x 14
           ("conv2", nn.Conv2d(16, 32, 3, padding=1))]
        + norm("bn2", nn.BatchNorm2d(32))
        + [("relu2", nn.ReLU()), ("pool2", nn.MaxPool2d(2)),   # 32 x 7 x 7
           ("flatten", nn.Flatten()), ("drop1", nn.Dropout(dropout)),
           ("fc1", nn.Linear(32 * 7 * 7, 128))]
        + norm("bn3", nn.BatchNorm1d(128))
        + [("relu3", nn.ReLU()), ("drop2", nn.Dropout(dropout)),
           ("fc2", nn.Linear(128, 10))]))


def add_run_options(parser):
    """The options of a run, which train.py prepare and alone.py share so
    that by default both train the same model in the same way."""
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1,
                        help="picks the initial values and the samples' "
                             "order")
    parser.add_argument("--samples", type=int, default=60000,
                        help="train on the first N images (a quick try)")
    parser.add_argument("--batchnorm", action="store_true",
                        help="batch normalization after each convolution "
                             "and the hidden dense layer")
    parser.add_argument("--dropout", type=float, default=0.25)


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    dims = struct.unpack(">" + "I" * data[3], data[4:4 + 4 * data[3]])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * data[3]).reshape(dims)


def load(split, directory=DATA):
    """Images (N, 1, 28, 28) in [0, 1] and labels, as torch tensors;
    split is "train" or "t10k"."""
    def path(kind):
        base = os.path.join(directory, "%s-%s-idx%d-ubyte" % (
            split, kind, 3 if kind == "images" else 1))
        return base if os.path.exists(base) else base + ".gz"
    x = read_idx(path("images")).astype(np.float32) / 255.0
    y = read_idx(path("labels")).astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def score(model, x, y, batch=1000):
    """Test accuracy and mean loss, dropout off."""
    model.eval()
    hits, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            out = model(x[i:i + batch])
            loss += nn.functional.cross_entropy(
                out, y[i:i + batch], reduction="sum").item()
            hits += (out.argmax(1) == y[i:i + batch]).sum().item()
    return hits / len(x), loss / len(x)
