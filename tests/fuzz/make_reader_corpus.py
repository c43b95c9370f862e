#!/usr/bin/env python3
# Writes the seed corpora of the file readers' fuzz targets (corpus/config,
# cluster_file, idx, cifar, safetensors, npy, npz, csv, click_log,
# table_file): a few
# valid files and the inputs that once crashed, hung or over-allocated a
# reader. Run by hand when a format changes; files it does not write
# (regress_*:
# reproducers of fixed findings, copied in as the fuzzer saved them) are
# left alone. How an input becomes files is in reader_inputs.hpp.
import gzip
import io
import json
import os
import struct
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

from corpus_checkpoints import safetensors_seeds, table_file_seeds  # noqa: E402


def write(corpus, seeds):
    out = os.path.join(HERE, "corpus", corpus)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def gz(data):
    return gzip.compress(data, mtime=0)


# -- config: the whole input is a config file ---------------------------

SYNTHETIC = {
    "name": "seed",
    "model": {"type": "mlp", "hidden": [8]},
    "data": {"format": "synthetic", "train_samples": 64, "test_samples": 16,
             "height": 2, "width": 2, "channels": 1, "classes": 3},
    "training": {"batch_size": 16, "optimizer": {"type": "adam"}},
    "cluster": {"shards": 1, "workers": 1},
}


def config_with(**sections):
    c = json.loads(json.dumps(SYNTHETIC))
    for key, value in sections.items():
        c[key] = value
    return json.dumps(c)


def repo_config(name):
    with open(os.path.join(HERE, "..", "..", "config", name), "rb") as f:
        return f.read()


def deep(n):
    return "[" * n + "]" * n


config = {
    "valid_synthetic": json.dumps(SYNTHETIC, indent=1),
    "valid_minimal": '{"model": {"type": "softmax"},'
                     ' "data": {"format": "synthetic"}}',
    "valid_every_key": json.dumps({
        "name": "all",
        "model": {"type": "cnn", "hidden": [16], "activation": "tanh",
                  "init": "xavier", "init_stddev": 0.5,
                  "conv_channels": [4, 8], "kernel_size": 3, "seed": 7},
        "data": {"format": "synthetic", "train_samples": 100,
                 "test_samples": 10, "height": 8, "width": 8, "channels": 3,
                 "classes": 10, "noise": 0.2, "seed": 3},
        "training": {"batch_size": 32, "epochs": 2, "max_steps": 50,
                     "seed": 2, "threads": 2, "device": "gpu:1",
                     "log_every_steps": 5, "eval_every_steps": 10,
                     "optimizer": {"type": "momentum", "learning_rate": 0.1,
                                   "momentum": 0.5, "nesterov": True,
                                   "weight_decay": 1e-4,
                                   "schedule": {"type": "exponential",
                                                "decay_steps": 10,
                                                "decay_rate": 0.5,
                                                "staircase": True}},
                     "checkpoint": {"dir": "ckpt", "every_steps": 10,
                                    "resume": True, "keep": 0}},
        "cluster": {"shards": 3, "workers": 4, "mode": "easgd", "tau": 2,
                    "beta": 0.5, "moving_rate": 0.1, "max_restarts": 0,
                    "restart_window_s": 1, "target_accuracy": 0.9,
                    "request_timeout_ms": 100, "metrics_dir": "m",
                    "heartbeat_interval_ms": 10,
                    "connection_timeout_ms": 11},
    }),
    # At the bound: 4096x4096 samples, 64 of them, 2^30 values.
    "valid_synthetic_at_bound": config_with(data={
        "format": "synthetic", "train_samples": 64, "test_samples": 64,
        "height": 4096, "width": 4096, "channels": 1}),
    "repo_local": repo_config("local.json"),
    "repo_cnn": repo_config("cnn.json"),
    "idx_missing_files": config_with(data={"format": "idx",
                                           "dir": "/nonexistent"}),
    "cifar_missing_files": config_with(data={
        "format": "cifar10", "dir": "/nonexistent",
        "train_files": ["a.bin", "b.bin"], "test_files": ["t.bin"]}),
    "number_1e400": config_with(training={"batch_size": 1e400}).replace(
        "Infinity", "1e400"),
    "number_minus_1e400": '{"model": {"type": "softmax", "init_stddev": '
                          '-1e400}, "data": {"format": "synthetic"}}',
    "integer_beyond_uint64": config_with(training={
        "seed": 99999999999999999999999}),
    "synthetic_huge": config_with(data={
        "format": "synthetic", "train_samples": 1 << 40,
        "test_samples": 1 << 40, "height": 4096, "width": 4096,
        "channels": 4096}),
    "synthetic_past_bound": config_with(data={
        "format": "synthetic", "train_samples": 65, "height": 4096,
        "width": 4096}),
    "hidden_65_layers": config_with(model={"type": "mlp",
                                           "hidden": [1] * 65}),
    "hidden_too_wide": config_with(model={"type": "mlp",
                                          "hidden": [65537]}),
    "deep_arrays": '{"model": {"type": "softmax"}, "x": ' + deep(1000) + "}",
    "deep_objects": '{"a":' * 40 + "1" + "}" * 40,
    "key_with_newline": '{"model": {"type": "softmax"},'
                        ' "data": {"format": "synthetic"}, "bad\\nkey": 1}',
    "value_with_nul": config_with(training={"device": "gpu:\u0000"}),
    "device_index_large": config_with(training={"device": "gpu:99999"}),
    "duplicate_keys": '{"model": {"type": "softmax"}, "model": 1,'
                      ' "data": {"format": "synthetic"}}',
    "bom": b"\xef\xbb\xbf" + json.dumps(SYNTHETIC).encode(),
    "invalid_utf8": b'{"name": "\xff\xfe", "model": {"type": "softmax"}}',
    "trailing_garbage": json.dumps(SYNTHETIC) + " }x",
    "empty": "",
    "null": "null",
}

# -- cluster_file: the input is the value of "cluster" --------------------


def repo_cluster(name):
    return json.dumps(json.loads(repo_config(name))["cluster"], indent=1)


def nodes(*specs, **extra):
    ns = []
    for i, (shards, workers) in enumerate(specs):
        n = {"name": "n%d" % i, "host": "127.0.0.1", "port": 7400 + i}
        if shards:
            n["shards"] = shards
        if workers:
            n["workers"] = workers
        ns.append(n)
    return dict({"nodes": ns}, **extra)


TLS = {"ca": "ca.pem", "certificate": "node.pem", "key": "node.key"}
own_certs = nodes((1, 0), (0, 1), tls={"ca": "ca.pem"})
for i, n in enumerate(own_certs["nodes"]):
    n["certificate"], n["key"] = "n%d.pem" % i, "n%d.key" % i
dup_name = nodes((1, 0), (0, 1))
dup_name["nodes"][1]["name"] = "n0"
dup_port = nodes((1, 0), (0, 1))
dup_port["nodes"][1]["port"] = 7400
newline_name = nodes((1, 0), (0, 1))
newline_name["nodes"][1]["name"] = "w\nrogue=1"
newline_name["chief"] = "w\nrogue=1"
newline_host = nodes((1, 1))
newline_host["nodes"][0]["host"] = "h\n/model/type=cnn"
cert_without_key = nodes((1, 1), tls=TLS)
cert_without_key["nodes"][0]["certificate"] = "n0.pem"
cert_without_tls = nodes((1, 1))
cert_without_tls["nodes"][0].update(certificate="c.pem", key="k.pem")
port_zero = nodes((1, 1))
port_zero["nodes"][0]["port"] = 0
cluster = {
    "valid_local": repo_cluster("cluster-local.json"),
    "valid_hosts": repo_cluster("cluster-hosts.json"),
    "valid_embedded": '{"shards": 2, "workers": 3, "mode": "sync",'
                      ' "replicas_to_aggregate": 2}',
    "valid_empty": "{}",
    "valid_tls": json.dumps(nodes((1, 0), (0, 1), tls=TLS)),
    "valid_own_certificates": json.dumps(own_certs),
    "valid_ssp_wait": json.dumps(nodes((2, 2), mode="ssp", staleness=0,
                                       on_node_loss="wait", chief="n0")),
    "max_counts": json.dumps(nodes(*[(1024, 1024)] * 8)),
    "duplicate_name": json.dumps(dup_name),
    "duplicate_host_port": json.dumps(dup_port),
    "name_with_newline": json.dumps(newline_name),
    "host_with_newline": json.dumps(newline_host),
    "shards_disagree": json.dumps(nodes((1, 1), shards=3)),
    "unknown_chief": json.dumps(nodes((1, 1), chief="nobody")),
    "no_shard": json.dumps(nodes((0, 1))),
    "no_worker": json.dumps(nodes((1, 0))),
    "nodes_empty": '{"nodes": []}',
    "nodes_not_array": '{"nodes": {"name": "a"}}',
    "port_zero": json.dumps(port_zero),
    "port_65536": json.dumps(nodes((1, 1))).replace("7400", "65536"),
    "tls_without_ca": json.dumps(nodes((1, 1), tls={"certificate": "c"})),
    "certificate_without_key": json.dumps(cert_without_key),
    "certificate_without_tls": json.dumps(cert_without_tls),
    "replicas_above_workers": '{"workers": 2, "replicas_to_aggregate": 3}',
    "heartbeat_not_below_timeout": '{"heartbeat_interval_ms": 3000,'
                                   ' "connection_timeout_ms": 3000}',
    "chief_without_nodes": '{"chief": "a"}',
    "breaks_out_of_the_section": '{}, "extra": 1',
    "number_1e400": '{"beta": 1e400}',
    "deep": '{"nodes": ' + deep(500) + "}",
    "nodes_1025": '{"nodes": [' + ",".join(["{}"] * 1025) + "]}",
    "null": "null",
}

# -- idx: flags byte, 2-byte split, image file, label file ----------------


def be32(*xs):
    return struct.pack(">%dI" % len(xs), *xs)


def idx_images(n, rows, cols, pixel=lambda i: i % 256, count=None):
    header = be32(0x803, n if count is None else count, rows, cols)
    return header + bytes(pixel(i) for i in range(n * rows * cols))


def idx_labels(n, label=lambda i: i % 10, count=None):
    return be32(0x801, n if count is None else count) + bytes(
        label(i) for i in range(n))


def idx(images, labels, gz_images=False, gz_labels=False):
    flags = (1 if gz_images else 0) | (2 if gz_labels else 0)
    return bytes([flags]) + struct.pack(">H", len(images)) + images + labels


def crc_flipped(data):
    g = bytearray(gz(data))
    g[-8] ^= 0xFF  # the CRC-32 of the gzip trailer
    return bytes(g)


img3, lbl3 = idx_images(3, 4, 4), idx_labels(3)
zeros_100 = be32(0x803, 100, 28, 28) + bytes(100 * 784)
idx_seeds = {
    "valid_plain": idx(img3, lbl3),
    "valid_gzipped": idx(img3, lbl3, True, True),
    "valid_28x28": idx(idx_images(2, 28, 28), idx_labels(2)),
    # gzip data of the input's own: 100 images in a few hundred bytes.
    "valid_raw_gzip_100": idx(gz(zeros_100), gz(idx_labels(100))),
    "count_0xffffffff": idx(be32(0x803, 0xFFFFFFFF, 28, 28), lbl3),
    "image_4096x4096": idx(be32(0x803, 1, 4096, 4096), idx_labels(1)),
    "image_4097_wide": idx(be32(0x803, 1, 1, 4097), idx_labels(1)),
    "image_negative_height": idx(be32(0x803, 1, 0x80000000, 1), lbl3),
    "count_0": idx(be32(0x803, 0, 28, 28), idx_labels(0)),
    "bad_magic": idx(be32(0x801, 3, 4, 4) + bytes(48), lbl3),
    "truncated_header": idx(be32(0x803, 3), lbl3),
    "truncated_pixels": idx(img3[:-1], lbl3),
    "trailing_pixels": idx(img3 + b"x", lbl3),
    "label_10": idx(img3, idx_labels(3, label=lambda i: 10)),
    "label_count_mismatch": idx(img3, idx_labels(3, count=4)),
    "labels_bad_magic": idx(img3, be32(0x803, 3) + bytes(3)),
    "labels_trailing": idx(img3, lbl3 + b"\0"),
    "gzip_bad_crc": idx(crc_flipped(img3), lbl3),
    # Every pixel arrives, the trailer with the CRC-32 does not.
    "gzip_trailer_cut": idx(gz(img3)[:-6], lbl3),
    "gzip_trailer_missing": idx(img3, gz(lbl3)[:-8]),
    "gzip_cut_in_data": idx(gz(img3)[:-12], lbl3),
    "split_past_end": b"\x00\xff\xff" + img3,
    "empty": b"",
}

# -- cifar: flags byte, 2-byte split, first file, second file -------------


def cifar_record(label, pixel=0):
    return bytes([label]) + bytes([pixel]) * 3072


def cifar(first, second=None, gz_first=False, gz_second=False):
    flags = (1 if gz_first else 0) | (2 if gz_second else 0)
    if second is None:
        return bytes([flags]) + b"\0\0" + first
    return bytes([flags | 4]) + struct.pack(">H", len(first)) + first + second


rec = cifar_record(3, 7)
cifar_seeds = {
    "valid_one_record": cifar(rec),
    # Inputs stay under the target's -max_len (4096): a second record
    # comes as gzip data of the input's own.
    "valid_two_files": cifar(rec, gz(cifar_record(9, 255) * 2)),
    "valid_gzipped": cifar(rec, gz_first=True),
    "valid_two_gzipped": cifar(gz(rec), cifar_record(0), gz_second=True),
    "valid_raw_gzip_40": cifar(gz(cifar_record(1) * 40)),
    "label_10": cifar(cifar_record(10)),
    "truncated_record": cifar(rec[:-1]),
    "trailing_bytes": cifar(rec + b"\1"),
    "empty_file": cifar(b""),
    "second_file_empty": cifar(rec, b""),
    "gzip_bad_crc": cifar(crc_flipped(rec)),
    "gzip_cut_in_data": cifar(gz(rec * 2)[:-10]),
    "gzip_trailer_cut": cifar(gz(rec)[:-3]),
    "gzip_header_only": cifar(gz(b"")[:10]),
}

# -- npy: byte 0 unused, 2-byte split, features .npy, labels .npy --------


def npy(descr, shape, data=b"", fortran=False, major=1, header=None):
    if header is None:
        header = ("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"
                  % (descr, fortran, shape))
    lead = 10 if major == 1 else 12
    header += " " * ((-(lead + len(header) + 1)) % 64) + "\n"
    size = struct.pack("<H" if major == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + size + header.encode() + data


def npy_pair(features, labels):
    return b"\x00" + struct.pack(">H", len(features)) + features + labels


F2 = npy("<f4", "(2, 3)", struct.pack("<6f", 0, 1, 2, 3, 4, -5))
L2 = npy("<i8", "(2,)", struct.pack("<2q", 1, 0))
npy_seeds = {
    "valid_f4_i8": npy_pair(F2, L2),
    "valid_u1_images": npy_pair(npy("|u1", "(2, 2, 2)", bytes(range(8))),
                                npy("|u1", "(2,)", b"\x03\x07")),
    "valid_f8_nhwc_v2": npy_pair(
        npy("<f8", "(1, 1, 2, 2)", struct.pack("<4d", 1, 2, 3, 4), major=2),
        npy("<u2", "(1,)", struct.pack("<H", 9), major=2)),
    "fortran": npy_pair(npy("<f4", "(2, 3)", bytes(24), fortran=True), L2),
    "big_endian": npy_pair(npy(">f4", "(2, 3)", bytes(24)), L2),
    "object_dtype": npy_pair(npy("|O", "(2, 3)", bytes(24)), L2),
    "structured": npy_pair(npy("", "", header="{'descr': [('a', '<f4')], "
                                              "'fortran_order': False, "
                                              "'shape': (2,), }"), L2),
    "shape_huge": npy_pair(npy("<f4", "(1099511627776, 1099511627776)"), L2),
    "shape_many_dims": npy_pair(npy("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"),
                                L2),
    "data_short": npy_pair(F2[:-3], L2),
    "data_long": npy_pair(F2 + b"xx", L2),
    "nan": npy_pair(npy("<f4", "(2, 1)", struct.pack("<2f", 0, float("nan"))),
                    L2),
    "labels_negative": npy_pair(F2, npy("<i4", "(2,)",
                                        struct.pack("<2i", 0, -3))),
    "labels_float": npy_pair(F2, npy("<f4", "(2,)", bytes(8))),
    "labels_count": npy_pair(F2, npy("|u1", "(3,)", b"\x00\x01\x02")),
    "header_length_past_file": npy_pair(b"\x93NUMPY\x01\x00\xff\xff{", L2),
    "version_9": npy_pair(npy("<f4", "(2, 3)", bytes(24), major=9), L2),
    "bad_magic": npy_pair(b"PK\x03\x04" + bytes(60), L2),
    "empty": b"",
}

# -- npz: the whole input is an archive with x_train.npy, y_train.npy ----


def npz(members, method=zipfile.ZIP_STORED, zip64=False):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=method) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            with z.open(info, "w", force_zip64=zip64) as f:
                f.write(data)
    return out.getvalue()


XY = {"x_train.npy": F2, "y_train.npy": L2}
npz_seeds = {
    "valid_stored": npz(XY),
    "valid_deflated": npz(XY, zipfile.ZIP_DEFLATED),
    "valid_zip64": npz(XY, zipfile.ZIP_DEFLATED, zip64=True),
    "member_missing": npz({"x_train.npy": F2}),
    "member_not_npy": npz({"x_train.npy": b"junk", "y_train.npy": L2}),
    "bzip2": npz(XY, zipfile.ZIP_BZIP2),
    "crc_flipped": (lambda b: b[:50] + bytes([b[50] ^ 0xFF]) + b[51:])(
        npz(XY)),
    "cut": npz(XY)[:-30],
    "not_zip": b"not a zip",
    "empty": b"",
}

# -- csv: the whole input is a CSV file, labels in column "label" --------

csv_seeds = {
    "valid": "a,label,b\n0.5,1,2\n-1e3,0,3.25\n",
    "valid_quoted_crlf": '"a","label"\r\n"1",2\r\n\r\n3,"0"\r\n',
    "no_label_column": "a,b\n1,2\n",
    "label_only": "label\n1\n",
    "duplicate_column": "a,a,label\n1,2,0\n",
    "ragged": "a,label\n1,0\n1,2,3\n",
    "not_a_number": "a,label\nx,0\n",
    "empty_value": "a,label\n,0\n",
    "label_not_integer": "a,label\n1,1.5\n",
    "label_negative": "a,label\n1,-1\n",
    "label_huge": "a,label\n1,99999999999999999999\n",
    "infinite": "a,label\ninf,0\n",
    "open_quote": 'a,label\n"1,0\n',
    "text_after_quote": 'a,label\n"1"x,0\n',
    "header_only": "a,label\n",
    "empty": "",
}

# -- click_log: the whole input is a click log of 2 numeric, 3 categorical --

click_log_seeds = {
    "valid": "1\t0.5\t-2\ta1\tb2,b3\tc4\n0\t\t1e3\ta1\t\tc5\n",
    "valid_crlf_blank": "0\t1\t2\tx\ty\tz\r\n\r\n1\t3\t4\tx\ty\tz\r\n",
    "bad_label": "2\t0.5\t1\ta\tb\tc\n",
    "too_few": "1\t0.5\t1\ta\tb\n",
    "too_many": "1\t0.5\t1\ta\tb\tc\td\n",
    "not_a_number": "1\tx\t1\ta\tb\tc\n",
    "infinite": "1\tinf\t1\ta\tb\tc\n",
    "empty_value": "1\t0\t1\ta,,b\tb\tc\n",
    "trailing_comma": "1\t0\t1\ta\tb,\tc\n",
    "empty": "",
}

write("config", config)
write("cluster_file", cluster)
write("idx", idx_seeds)
write("cifar", cifar_seeds)
write("safetensors", safetensors_seeds)
write("npy", npy_seeds)
write("npz", npz_seeds)
write("csv", csv_seeds)
write("click_log", click_log_seeds)
write("table_file", table_file_seeds)
