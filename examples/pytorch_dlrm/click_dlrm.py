"""The model and the data of the example: a DLRM-style PyTorch model (one
embedding bag per categorical field, the pooled rows and the numeric
fields into an MLP, binary cross-entropy), its step on troupe, and click
logs as troupe-clicks writes them, read with NumPy; and the options of a
run.
train.py trains it on troupe, whose shards hold the tables; alone.py
trains it with PyTorch alone, the tables in torch.nn.EmbeddingBag."""

import numpy as np
import torch
from torch import nn


def make_model(numeric, vocabularies, dim=8, hidden=(64, 32), seed=1,
               on_troupe=True):
    """The model. On troupe each field's bag is troupe.EmbeddingBag (its
    table on the shards, named cat0, cat1, ...); alone it is
    nn.EmbeddingBag with its rows uniform in [-0.05, 0.05] as troupe makes
    them. The MLP is made first, so both start from the same weights."""
    torch.manual_seed(seed)
    return ClickDlrm(numeric, vocabularies, dim, hidden, on_troupe)


class ClickDlrm(nn.Module):
    def __init__(self, numeric, vocabularies, dim, hidden, on_troupe):
        super().__init__()
        layers, width = [], numeric + len(vocabularies) * dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.mlp = nn.Sequential(*layers, nn.Linear(width, 1))
        if on_troupe:
            import troupe
            # The only lines that differ from a model of its own tables.
            self.bags = nn.ModuleList(
                [troupe.EmbeddingBag(table_name(f), mode="mean")
                 for f in range(len(vocabularies))])
        else:
            self.bags = nn.ModuleList(
                [nn.EmbeddingBag(v, dim, mode="mean", sparse=True)
                 for v in vocabularies])
            for bag in self.bags:
                nn.init.uniform_(bag.weight, -0.05, 0.05)

    def forward(self, numeric, fields):
        """numeric: (samples, numeric) floats; fields: on troupe the step's
        rows (a dict of troupe.Rows), alone one (ids, offsets) per field."""
        if isinstance(fields, dict):
            pooled = [bag(fields) for bag in self.bags]
        else:
            pooled = [bag(*f) for bag, f in zip(self.bags, fields)]
        return self.mlp(torch.cat([numeric] + pooled, dim=1)).squeeze(1)


def make_step(model, numeric, labels):
    """The step troupe calls on a worker (troupe.run_node's step): the
    batch `samples` of the training set, its rows a dict of troupe.Rows
    per table. numeric, labels: the training set's, as tensors."""
    import troupe

    def step(params, samples, rows):
        troupe.load_state(model, params)
        model.zero_grad()
        i = torch.from_numpy(samples)
        out = model(numeric[i], rows)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            out, labels[i])
        loss.backward()
        hits = ((out > 0).float() == labels[i]).sum().item()
        # The MLP's gradients and each table's rows' gradients.
        return (troupe.step_result(model, rows), loss.item() * len(i), hits)
    return step


def table_name(field):
    return "cat%d" % field


class ClickLogs:
    """A TSV file of troupe-clicks: label, numeric fields, then the
    categorical fields, each a comma-separated bag of tokens. Tokens are
    numbered per field in the order they are first read (`vocab`, shared
    by the training and the test file). keys[f] is an int64 array of
    (samples, widest bag) keys of field f, -1 where a bag is shorter."""

    def __init__(self, path, numeric, categorical, vocab=None):
        self.vocab = vocab if vocab is not None else [
            {} for _ in range(categorical)]
        labels, values = [], []
        bags = [[] for _ in range(categorical)]
        with open(path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                labels.append(float(cols[0]))
                values.append([float(v) if v else 0.0
                               for v in cols[1:1 + numeric]])
                for field, text in enumerate(cols[1 + numeric:]):
                    ids = self.vocab[field]
                    bags[field].append([ids.setdefault(t, len(ids))
                                        for t in text.split(",") if t])
        self.count = len(labels)
        self.labels = np.asarray(labels, dtype=np.float32)
        self.numeric = np.asarray(values, dtype=np.float32).reshape(
            self.count, numeric)
        self.keys = []
        for field in bags:
            width = max(1, max(len(b) for b in field))
            k = np.full((self.count, width), -1, dtype=np.int64)
            for i, b in enumerate(field):
                k[i, :len(b)] = b
            self.keys.append(k)

    def bags(self, samples):
        """Each field's (ids, offsets) for nn.EmbeddingBag, for `samples`."""
        out = []
        for k in self.keys:
            rows = k[samples]
            used = rows >= 0
            counts = used.sum(1)
            offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
            out.append((torch.from_numpy(rows[used]),
                        torch.from_numpy(offsets)))
        return out


def scores(logits, labels):
    """Log-loss and ROC AUC of click logits."""
    p = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    p = np.clip(p, 1e-7, 1 - 1e-7)
    y = labels.astype(np.float64)
    loss = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    ranks[order] = np.arange(1, len(p) + 1)
    # Ties share their mean rank.
    sorted_p = p[order]
    start = 0
    for i in range(1, len(p) + 1):
        if i == len(p) or sorted_p[i] != sorted_p[start]:
            ranks[order[start:i]] = (start + 1 + i) / 2.0
            start = i
    positives = y.sum()
    negatives = len(y) - positives
    auc = float((ranks[y > 0.5].sum() - positives * (positives + 1) / 2)
                / max(positives * negatives, 1))
    return loss, auc


def add_run_options(parser):
    """The options of a run, which train.py prepare and alone.py share so
    that by default both train the same model in the same way."""
    parser.add_argument("--data", required=True,
                        help="folder of troupe-clicks' train.tsv and "
                             "test.tsv")
    parser.add_argument("--numeric", type=int, default=2)
    parser.add_argument("--categorical", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 32])
    parser.add_argument("--lr", type=float, default=0.001,
                        help="Adam's, for the MLP")
    parser.add_argument("--table-lr", type=float, default=0.05,
                        help="Adagrad's, for the tables' rows")
    parser.add_argument("--seed", type=int, default=1,
                        help="picks the initial values and the samples' "
                             "order")
