"""Embedding tables on troupe's shards from a PyTorch model.

A run config declares the tables ("model": {"type": "external", ...,
"tables": [{"name": "user", "vocabulary": 1000000, "dim": 16}]}); the
shards hold their rows, made as keys are first used, and update them with
each table's row optimizer. The step names each sample's keys (train(...,
keys={"user": ids})); troupe pulls the rows of a batch's distinct keys
before the step and hands them over as a Rows per table:

    def step(params, samples, rows):
        troupe.load_state(model, params)
        model.zero_grad()
        loss = loss_fn(model(x[samples], rows), y[samples])
        loss.backward()
        return troupe.step_result(model, rows), loss.item() * len(samples)

where the model pools them with troupe.EmbeddingBag, in place of
torch.nn.EmbeddingBag(vocabulary, dim, mode=...):

    self.user = troupe.EmbeddingBag("user", mode="mean")
    ...
    pooled = self.user(rows)       # (samples, dim)
"""

__all__ = ["Rows", "EmbeddingBag", "row_gradients"]


class Rows:
    """One table's rows for a step's batch.

    keys: int64 (samples, width), each sample's keys as keys= gave them
        (-1: none there).
    unique: int64 (distinct,), the batch's distinct keys, in the order
        they first occur.
    inverse: int64 (samples, width), each key's index in unique (-1 where
        keys is -1).
    values: float32 (distinct, dim), the row of each distinct key as the
        shards hold it; the step may write it (it is this step's copy).
    """

    __slots__ = ("table", "keys", "unique", "inverse", "values", "_tensor")

    def __init__(self, table, keys, unique, inverse, values):
        self.table = table
        self.keys = keys
        self.unique = unique
        self.inverse = inverse
        self.values = values
        self._tensor = None

    def __repr__(self):
        return "Rows(%r: %d samples x %d keys, %d distinct, dim %d)" % (
            self.table, self.keys.shape[0], self.keys.shape[1],
            self.unique.shape[0], self.values.shape[1])

    def tensor(self):
        """values as a torch leaf tensor that requires its gradient (the
        same one each call, without a copy): what a model pools, and
        whose .grad is the table's gradient after backward()."""
        if self._tensor is None:
            import torch

            self._tensor = torch.from_numpy(self.values).requires_grad_()
        return self._tensor

    def gradient(self):
        """The gradient of values after backward() (zeros when no loss
        used them): what the step returns for the table."""
        import torch

        t = self.tensor()
        return t.grad if t.grad is not None else torch.zeros_like(t)

    def bag(self, mode="mean", per_sample_weights=None):
        """Each sample's keys pooled: (samples, dim), as
        torch.nn.functional.embedding_bag pools them (mode "mean", "sum"
        or "max"; a sample without keys pools to zeros)."""
        import torch
        import torch.nn.functional as F

        weight = self.tensor()
        inverse = torch.from_numpy(self.inverse)
        samples, width = inverse.shape
        if width == 1 and per_sample_weights is None \
                and bool((inverse >= 0).all()):
            return F.embedding(inverse[:, 0], weight)
        used = inverse >= 0
        counts = used.sum(dim=1)
        offsets = torch.zeros(samples, dtype=torch.int64)
        if samples > 1:
            offsets[1:] = torch.cumsum(counts, 0)[:-1]
        weights = None
        if per_sample_weights is not None:
            weights = torch.as_tensor(per_sample_weights)[used]
        return F.embedding_bag(inverse[used], weight, offsets, mode=mode,
                               per_sample_weights=weights)


def _make_embedding_bag():
    import torch

    class EmbeddingBag(torch.nn.Module):
        """A bag of embeddings whose table lives on troupe's shards: in
        place of torch.nn.EmbeddingBag(vocabulary, dim, mode=mode),
        EmbeddingBag(table, mode) pools the rows troupe pulled for the step,
        module(rows) -> (samples, dim) with rows the step's dict of Rows (or
        the table's Rows). It holds no parameter: the table is not in the
        model's state_dict, and its gradient goes back through
        troupe.step_result(model, rows)."""

        def __init__(self, table, mode="mean"):
            super().__init__()
            if mode not in ("mean", "sum", "max"):
                raise ValueError("mode must be \"mean\", \"sum\" or \"max\", "
                                 "not %r" % (mode,))
            self.table = table
            self.mode = mode

        def forward(self, rows, per_sample_weights=None):
            if isinstance(rows, dict):
                if self.table not in rows:
                    raise KeyError("no rows of table %r in this step (its "
                                   "tables: %s)"
                                   % (self.table, ", ".join(sorted(rows))))
                rows = rows[self.table]
            return rows.bag(self.mode, per_sample_weights)

        def extra_repr(self):
            return "%r, mode=%r" % (self.table, self.mode)

    EmbeddingBag.__module__ = "troupe"
    return EmbeddingBag


def __getattr__(name):
    # EmbeddingBag is a torch module: made on first use, so that a NumPy
    # user's `import troupe` does not import torch.
    if name == "EmbeddingBag":
        cls = _make_embedding_bag()
        globals()["EmbeddingBag"] = cls
        return cls
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def row_gradients(rows):
    """Each table's gradient after backward(): table name -> (distinct,
    dim) tensor, what a step returns beside the dense gradients."""
    return {name: r.gradient() for name, r in rows.items()}
