"""TensorBoard's event files of a run, read back from the format: a click
model trains in one troupe-node process with a metrics folder, and then

- `<dir>/tensorboard/<run>-<run id>/` holds one event file, named as
  TensorBoard finds them (`events.out.tfevents.*`);
- every record's framing is TFRecord's: its length and its data each
  followed by their masked CRC-32C (the CRC written here from its
  definition, checked against the standard check value);
- every record is an Event that Google's protobuf library parses with the
  fields of TensorBoard's event.proto and summary.proto (as much of them
  as scalars use; the library, not this test, decodes the bytes): the
  first holds file_version "brain.Event:2", the rest one scalar each;
- the scalars are the run's: train/loss and train/examples_per_sec at
  each step of the `.progress.csv` file with its values, test/<score> and
  test/loss at each evaluation of the `.csv` file, wall times in order.

TensorBoard itself is not in Debian, hence a reader from the format.
Run by ctest (tensorboard.events) with TROUPE_BUILD_DIR. Exit 77 (skipped)
outside CI when python3-protobuf is missing."""

import csv
import glob
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import (  # noqa: E402 (the path above first)
    Failure, check, missing_tools, say, scratch_run, troupe_program)

try:
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf import message_factory
except ImportError:
    descriptor_pb2 = None


def crc32c(data):
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) \
        & 0xFFFFFFFF


def event_class():
    """tensorflow.Event with the fields scalars use, field numbers and
    types as TensorBoard's event.proto and summary.proto give them."""
    f = descriptor_pb2.FileDescriptorProto(name="tb_event_subset.proto",
                                           package="tensorflow",
                                           syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING,
                    label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT,
                    label=T.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=T.TYPE_MESSAGE,
                      type_name=".tensorflow.Value",
                      label=T.LABEL_REPEATED)
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE,
                    label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64,
                    label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING,
                    label=T.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=T.TYPE_MESSAGE,
                    type_name=".tensorflow.Summary", label=T.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    desc = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf 4
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def records(path):
    """Each record's data, its framing and CRCs checked."""
    with open(path, "rb") as f:
        data = f.read()
    at, out = 0, []
    while at < len(data):
        check(at + 12 <= len(data), "%s: a whole record head at %d" % (
            path, at))
        head = data[at:at + 8]
        (length,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if head_crc != masked(crc32c(head)):
            raise Failure("%s: record at %d: its length's CRC is wrong" % (
                path, at))
        body = data[at + 12:at + 12 + length]
        check(len(body) == length and at + 16 + length <= len(data),
              "%s: the record at %d is whole" % (path, at))
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:
                                               at + 16 + length])
        if body_crc != masked(crc32c(body)):
            raise Failure("%s: record at %d: its data's CRC is wrong" % (
                path, at))
        out.append(body)
        at += 16 + length
    return out


def read_csv(path):
    with open(path) as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def run_click(folder):
    """A click model in one process, with a metrics folder."""
    apps = os.path.dirname(troupe_program("troupe-node"))
    logs = os.path.join(folder, "clicks")
    subprocess.run([os.path.join(apps, "troupe-clicks"), "--out", logs,
                    "--train", "8000", "--test", "1000", "--numeric", "2",
                    "--categorical", "3", "--values", "500", "--seed", "5"],
                   check=True, stdout=subprocess.DEVNULL)
    metrics = os.path.join(folder, "metrics")
    config = {
        "name": "tb-click",
        "model": {"type": "click", "hidden": [8], "seed": 1,
                  "embedding": {"dim": 4}},
        "data": {"format": "click", "dir": logs, "train": "train.tsv",
                 "test": "test.tsv", "numeric": 2, "categorical": 3,
                 "vocabulary": 1 << 16},
        "training": {"batch_size": 100, "epochs": 3, "seed": 1,
                     "threads": 1, "log_every_steps": 20,
                     "eval_every_steps": 100,
                     "optimizer": {"type": "adam", "learning_rate": 0.01},
                     "sparse_optimizer": {"type": "adagrad",
                                          "learning_rate": 0.05}},
        "cluster": {"shards": 2, "workers": 1, "mode": "async",
                    "metrics_dir": metrics}}
    path = os.path.join(folder, "tb-click.json")
    with open(path, "w") as f:
        json.dump(config, f)
    out = subprocess.run([troupe_program("troupe-node"), "--config", path],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=240)
    check(out.returncode == 0, "the run ends well", out.stdout[-2000:])
    return metrics


def main():
    missing_tools({"python3-protobuf": descriptor_pb2}, "python3-protobuf")
    check(crc32c(b"123456789") == 0xE3069283,
          "CRC-32C gives the standard check value")
    with scratch_run("troupe-tensorboard-") as run:
        metrics = run_click(run.folder)
        bases = glob.glob(os.path.join(metrics, "tb-click-*.progress.csv"))
        check(len(bases) == 1, "one run's files in the metrics folder")
        base = bases[0][:-len(".progress.csv")]
        run_name = os.path.basename(base)
        files = glob.glob(os.path.join(metrics, "tensorboard", run_name,
                                       "events.out.tfevents.*"))
        check(len(files) == 1, "one event file in tensorboard/%s/" % run_name,
              str(os.listdir(metrics)))
        Event = event_class()
        events = []
        for body in records(files[0]):
            e = Event()
            e.ParseFromString(body)
            events.append(e)
        check(len(events) > 1 and events[0].file_version == "brain.Event:2",
              "%d records, each framed and checked, the first saying "
              "brain.Event:2" % len(events))
        check(all(len(e.summary.value) == 1 for e in events[1:]),
              "one scalar in each event after the first")
        scalars = {}
        for e in events[1:]:
            v = e.summary.value[0]
            scalars.setdefault(v.tag, []).append((e.step, v.simple_value))
        times = [e.wall_time for e in events]
        check(times == sorted(times) and times[0] > 1.7e9,
              "wall times in order, as seconds since the epoch")

        def same(tag, rows, column):
            want = [(int(r["step"]), float(r[column])) for r in rows]
            got = scalars.get(tag, [])
            check(len(got) == len(want) and len(want) > 0 and all(
                  gs == ws and abs(gv - wv) <= 1e-4 * max(1, abs(wv))
                  for (gs, gv), (ws, wv) in zip(got, want)),
                  "%s: %d points, at the steps and values of the CSV's %s"
                  % (tag, len(want), column), "%s vs %s" % (got[:5],
                                                              want[:5]))

        progress = read_csv(base + ".progress.csv")
        same("train/loss", progress, "loss")
        same("train/examples_per_sec", progress, "examples_per_sec")
        evaluations = read_csv(base + ".csv")
        score = [k for k in evaluations[0] if k.startswith("test_")
                 and k != "test_loss"][0]
        same("test/" + score[len("test_"):], evaluations, score)
        same("test/loss", evaluations, "test_loss")
        say("tags: %s" % ", ".join(sorted(scalars)))
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
