"""A table as a run's exports leave it (training.export): the newest full
export at or before the one asked for, then each delta after it applied in
order (its tombstones removed, its changed rows put), as
runtime/sparse/table_export.hpp describes the folder. NumPy and the
standard library alone, so that a serving job can take this file as it is.
"""

import json
import os
import struct

__all__ = ["read_export"]


def _header_of(path):
    """The JSON header of safetensors file `path`, and where its data
    section begins."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length)), 8 + length


def _counts(text):
    return [int(v) for v in text.split(",")] if text else []


def _export_file(path, table, kind, sequence):
    """(metadata, ids, values, evicted) of an export's table file, checked
    against what the manifest says it is."""
    import numpy as np

    header, base = _header_of(path)
    meta = header.get("__metadata__", {})
    if (meta.get("format") != "troupe-tables" or meta.get("table") != table
            or meta.get("export") != kind
            or meta.get("sequence") != str(sequence)):
        raise ValueError(
            "%s is not %s export %d of table %r (its metadata says format "
            "%r, table %r, export %r, sequence %r)"
            % (path, kind, sequence, table, meta.get("format"),
               meta.get("table"), meta.get("export"), meta.get("sequence")))
    dim = int(meta["dim"])
    parts = {"ids": [np.zeros(0, "<u8")], "values": [np.zeros((0, dim), "<f4")],
             "evicted": [np.zeros(0, "<u8")]}
    pieces = sorted((entry["data_offsets"][0], key.rsplit("/", 1)[1],
                     entry["shape"][0])
                    for key, entry in header.items() if key != "__metadata__")
    with open(path, "rb") as f:
        for begin, what, rows in pieces:
            f.seek(base + begin)
            if what == "values":
                parts[what].append(np.fromfile(f, dtype="<f4",
                                               count=rows * dim)
                                   .reshape(rows, dim))
            else:
                parts[what].append(np.fromfile(f, dtype="<u8", count=rows))
    return (meta, np.concatenate(parts["ids"]),
            np.concatenate(parts["values"]),
            np.concatenate(parts["evicted"]))


def read_export(folder, table, upto=None):
    """Table `table` as of export `upto` of export folder `folder` (None:
    its newest export): (keys, an int64 array (n,) ascending; values, a
    float32 array (n, dim)), row i of values being key keys[i]'s: the rows
    the shards held at that export, bit for bit.

    Raises FileNotFoundError for a folder without a manifest, KeyError for
    an export or a table the manifest does not name, and ValueError naming
    the file for a delta that does not follow the export before it (one
    missing or repeated) or a file that is not the export the manifest
    says."""
    import numpy as np

    manifest_path = os.path.join(folder, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("format") != "troupe-exports" or manifest.get(
            "version") != 1:
        raise ValueError("%s is not a troupe exports manifest" % manifest_path)
    entries = manifest["exports"]
    chosen = [i for i, e in enumerate(entries)
              if upto is None or e["sequence"] <= upto]
    if not chosen or (upto is not None
                      and entries[chosen[-1]]["sequence"] != upto):
        raise KeyError("%s names no export %s"
                       % (manifest_path, "at all" if upto is None else upto))
    last = chosen[-1]
    first = last
    while entries[first]["kind"] != "full":
        if first == 0:
            raise ValueError("%s: export %d follows no full export"
                             % (manifest_path, entries[last]["sequence"]))
        first -= 1
    keys = values = None
    pushes, before = None, None
    for entry in entries[first:last + 1]:
        if table not in entry["tables"]:
            raise KeyError("%s: export %d holds no table %r; its tables: %s"
                           % (manifest_path, entry["sequence"], table,
                              ", ".join(sorted(entry["tables"]))))
        path = os.path.join(folder, entry["tables"][table])
        meta, ids, rows, evicted = _export_file(path, table, entry["kind"],
                                                entry["sequence"])
        if entry["kind"] == "full":
            keys, values = ids, rows
        else:
            if _counts(meta.get("since", "")) != pushes:
                raise ValueError(
                    "%s: a delta that does not follow %s (the push counts it "
                    "follows are not that file's: an export is missing or "
                    "repeated)" % (path, before))
            gone = np.isin(keys, np.concatenate([evicted, ids]))
            keys = np.concatenate([keys[~gone], ids])
            values = np.concatenate([values[~gone], rows])
        pushes, before = _counts(meta.get("pushes", "")), path
    order = np.argsort(keys, kind="stable")
    return keys[order].astype(np.int64), values[order].astype(np.float32)
