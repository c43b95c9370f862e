# The seed corpora of the readers of files troupe writes itself and reads
# back: safetensors checkpoints and an embedding table's checkpoint file
# (make_reader_corpus.py writes them with the others).
import json
import struct


def deep(n):
    return "[" * n + "]" * n

# -- safetensors: the input is the checkpoint file -------------------------

META = {"format": "troupe-checkpoint", "version": "1", "step": "7",
        "optimizer": "adam"}
TENSORS = [("dense0/w", [2, 3]), ("dense0/b", [3])]


def safetensors(header, data, length=None, pad=True):
    text = json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def checkpoint(prefixes=("params",), meta=None, values=None, tweak=None,
               extra=()):
    """A valid checkpoint (values 0.5, 1.5, ...) with `extra` tensors
    (key, dims) after the layout's, then tweak(header)."""
    header = {"__metadata__": dict(META if meta is None else meta)}
    offset, floats = 0, []
    tensors = [("%s/%s" % (p, name), dims) for p in prefixes
               for name, dims in TENSORS] + list(extra)
    for key, dims in tensors:
        size = 1
        for d in dims:
            size *= d
        header[key] = {"dtype": "F32", "shape": dims,
                       "data_offsets": [offset, offset + 4 * size]}
        floats += [0.5 + len(floats) + k for k in range(size)]
        offset += 4 * size
    if values is not None:
        floats = values(floats)
    if tweak is not None:
        tweak(header)
    return safetensors(header, struct.pack("<%df" % len(floats), *floats))


def meta_with(**kv):
    return dict(META, **kv)


def set_key(key, field, value):
    def tweak(h):
        h[key][field] = value
    return tweak


def nan_first(xs):
    return [float("nan")] + xs[1:]


def inf_last(xs):
    return xs[:-1] + [float("inf")]


def alias(h):
    h["adam_m/dense0/w"]["data_offsets"] = h["params/dense0/w"]["data_offsets"]


def drop(key):
    def tweak(h):
        del h[key]
    return tweak


W = "params/dense0/w"
safetensors_seeds = {
    "valid_params": checkpoint(),
    "valid_adam": checkpoint(("params", "adam_m", "adam_v")),
    "valid_stamped": checkpoint(meta=meta_with(
        run_id="r1", config_digest="0123456789abcdef",
        config="/model/type=mlp\n/model/seed=1\n")),
    "valid_scalar": safetensors(
        {"__metadata__": META,
         "params/s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}},
        struct.pack("<f", 2.0)),
    "step_minus_5": checkpoint(meta=meta_with(step="-5")),
    "step_1e3": checkpoint(meta=meta_with(step="1e3")),
    "step_100x": checkpoint(meta=meta_with(step="100x")),
    "step_empty": checkpoint(meta=meta_with(step="")),
    "step_19_digits": checkpoint(meta=meta_with(step="9" * 19)),
    "step_number": checkpoint(meta=dict(META, step=7)),
    "step_with_newline": checkpoint(meta=meta_with(step="1\n2")),
    "key_with_newline_not_object": checkpoint(
        tweak=lambda h: h.update({"params/a\nb": 5})),
    "valid_name_with_newline": safetensors(
        {"__metadata__": META,
         "params/a\nb": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
        struct.pack("<f", -0.0)),
    "nan_param": checkpoint(values=nan_first),
    "inf_slot": checkpoint(("params", "adam_m"), values=inf_last),
    "slot_aliases_params": checkpoint(("params", "adam_m"), tweak=alias),
    "tensors_overlap": checkpoint(tweak=set_key("params/dense0/b",
                                                "data_offsets", [20, 32])),
    "offsets_reversed": checkpoint(tweak=set_key(W, "data_offsets", [24, 0])),
    "offsets_past_data": checkpoint(tweak=set_key(W, "data_offsets",
                                                  [1 << 40, (1 << 40) + 24])),
    "offsets_negative": checkpoint(tweak=set_key(W, "data_offsets", [-24, 0])),
    "shape_zero": checkpoint(tweak=set_key(W, "shape", [0, 3])),
    "shape_product_overflows": checkpoint(tweak=set_key(
        W, "shape", [1 << 32, 1 << 32, 1 << 32])),
    "shape_nine_dims": checkpoint(tweak=set_key(W, "shape", [1] * 9)),
    "dtype_f16": checkpoint(tweak=set_key(W, "dtype", "F16")),
    "dtype_missing": checkpoint(tweak=lambda h: h[W].pop("dtype")),
    "slot_missing_tensor": checkpoint(("params", "adam_m"),
                                      tweak=drop("adam_m/dense0/b")),
    "tensor_no_layout_names": checkpoint(("params", "adam_m"),
                                         extra=[("adam_m/other", [2])]),
    "tensor_of_no_vector": checkpoint(extra=[("other/x", [1])]),
    "tensor_without_slash": safetensors(
        {"__metadata__": META,
         "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
        bytes(4)),
    "no_metadata": checkpoint(tweak=drop("__metadata__")),
    "metadata_not_string": checkpoint(meta=dict(META, extra=[1])),
    "format_other": checkpoint(meta=meta_with(format="other")),
    "version_2": checkpoint(meta=meta_with(version="2")),
    "header_length_huge": safetensors({"__metadata__": META}, b"",
                                      length=(1 << 64) - 1),
    "header_length_past_file": safetensors({"__metadata__": META}, b"",
                                           length=1 << 20),
    "header_length_0": safetensors({}, b"", length=0),
    "header_not_object": safetensors([], b""),
    "header_deep": struct.pack("<Q", 2000) + deep(1000).encode(),
    # One more tensor than read_checkpoint takes (4096).
    "tensors_4097": safetensors(
        dict({"__metadata__": META}, **{"%x" % i: 0 for i in range(4097)}),
        b""),
    "shorter_than_length": b"\x01\x00\x00",
    "empty": b"",
}


# -- table_file: an embedding table's checkpoint (runtime/sparse/table_file.hpp) --


def table_file(parts, dim=2, slots=("accumulator",), vocab=100, fill=0.5,
               pushes=None, extra_meta=None, shift=0, ages=False, counters=0):
    """parts: a list of id lists, one per part (one piece each); ages:
    each row's age and uses after its slots; counters: each part's
    admission counts after its rows (version 2)."""
    header = {"__metadata__": {
        "format": "troupe-tables",
        "version": "2" if ages or counters else "1", "table": "embedding",
        "dim": str(dim), "vocabulary": str(vocab), "optimizer": "adagrad",
        "slots": ",".join(slots),
        "parts": ",".join(str(len(p)) for p in parts),
        "pushes": ",".join(str(x) for x in (pushes or [3] * len(parts)))}}
    if ages:
        header["__metadata__"]["rows"] = "ages,uses"
    if counters:
        header["__metadata__"]["admission"] = "%d,7" % counters
    header["__metadata__"].update(extra_meta or {})
    data = b""
    for p, ids in enumerate(parts):
        if counters:
            name = "embedding/p%d/c0/counts" % p
            tail = (name, {"dtype": "U8", "shape": [counters]},
                    bytes(range(counters % 256)) * (counters // 256 + 1))
        if not ids:
            if counters:
                tail[1]["data_offsets"] = [len(data), len(data) + counters]
                header[tail[0]] = tail[1]
                data += tail[2][:counters]
            continue
        n = len(ids)
        prefix = "embedding/p%d/k0/" % p
        header[prefix + "ids"] = {"dtype": "U64", "shape": [n],
                                  "data_offsets": [len(data) + shift,
                                                   len(data) + 8 * n + shift]}
        data += struct.pack("<%dQ" % n, *ids)
        for name in ("values",) + tuple(slots):
            header[prefix + name] = {
                "dtype": "F32", "shape": [n, dim],
                "data_offsets": [len(data), len(data) + 4 * n * dim]}
            data += struct.pack("<%df" % (n * dim), *([fill] * (n * dim)))
        if ages:
            header[prefix + "ages"] = {"dtype": "I64", "shape": [n],
                                       "data_offsets": [len(data),
                                                        len(data) + 8 * n]}
            data += struct.pack("<%dq" % n, *range(n))
            header[prefix + "uses"] = {"dtype": "U32", "shape": [n],
                                       "data_offsets": [len(data),
                                                        len(data) + 4 * n]}
            data += struct.pack("<%dI" % n, *([1] * n))
        if counters:
            tail[1]["data_offsets"] = [len(data), len(data) + counters]
            header[tail[0]] = tail[1]
            data += tail[2][:counters]
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


table_file_seeds = {
    "valid_two_parts": table_file([[1, 7, 42], [5]]),
    "valid_adam": table_file([[3, 4]], slots=("m", "v"), dim=3),
    "valid_empty_part": table_file([[], [9]]),
    "id_outside_vocabulary": table_file([[1, 100]]),
    "not_finite": table_file([[1]], fill=float("inf")),
    "moved_offsets": table_file([[1, 2]], shift=8),
    "more_rows_than_file": table_file([[1]], extra_meta={"parts": "9999999"}),
    "bad_slot": table_file([[1]], slots=("momentum",)),
    "bad_version": table_file([[1]], extra_meta={"version": "3"}),
    # A bounded table's: rows with their ages and uses, each part's
    # admission counts after its rows.
    "valid_ages_and_counts": table_file([[1, 7], [5]], ages=True,
                                        counters=40),
    "valid_counts_empty_part": table_file([[], [9]], counters=10),
    "ages_in_version_1": table_file([[1]], ages=True,
                                    extra_meta={"version": "1"}),
    "bad_admission": table_file([[1]], counters=8,
                                extra_meta={"admission": "8"}),
    "truncated": table_file([[1, 2, 3]])[:-5],
    "empty": b"",
}
