#!/usr/bin/env bash
# This build against an earlier one, for changes that must not change
# results (a restructuring, a refactor): the same configs, seeds and steps
# trained by both builds' troupe-node in one process must give checkpoints
# whose tensors are bitwise equal. Configs whose results do not depend on
# timing: config/local.json's MLP and the CNN with one worker (async),
# the MLP with two workers in sync mode, EASGD with one worker, and a
# click model of logs drawn by troupe-clicks with one worker (its table's
# file too). Prints one line per config and exits 1 when any differs.
# Usage: scripts/bitwise-before.sh BEFORE_BUILD [steps, default 60]
#   BEFORE_BUILD: a build folder of the earlier commit with troupe-node
#   built in it (see scripts/bench-before.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
before="${1:?usage: scripts/bitwise-before.sh BEFORE_BUILD [steps]}"
steps="${2:-60}"
cd "$TROUPE_ROOT"
for program in troupe-node troupe-clicks; do
  [ -x "$TROUPE_BUILD/apps/$program" ] || troupe_setup
done
exec python3 - "$TROUPE_BUILD" "$before" "$steps" <<'PY'
import json, os, struct, subprocess, sys
from benchlib import scratch_dir

after, before, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
work = scratch_dir()
subprocess.run([f"{after}/apps/troupe-clicks", "--out", f"{work}/clicks",
                "--train", "4000", "--test", "500", "--numeric", "2",
                "--categorical", "4", "--values", "200", "--seed", "3"],
               check=True, capture_output=True)
local = json.load(open("config/local.json"))
cnn = json.load(open("config/cnn.json"))


def run_of(base, **cluster):
    c = json.loads(json.dumps(base))
    c["training"].update(max_steps=steps, eval_every_steps=10**9,
                         log_every_steps=10**9, threads=1)
    c["cluster"] = dict(c.get("cluster", {}), **cluster)
    c["cluster"].pop("nodes", None)
    return c


click = {
    "name": "clicks",
    "model": {"type": "click", "seed": 1},
    "data": {"format": "click", "train": f"{work}/clicks/train.tsv",
             "test": f"{work}/clicks/test.tsv", "numeric": 2,
             "categorical": 4},
    "training": {"batch_size": 64, "seed": 1,
                 "optimizer": {"type": "adam", "learning_rate": 0.001}},
}
configs = {
    "mlp, async, 1 worker": run_of(local, mode="async", shards=2, workers=1),
    "mlp, sync, 2 workers": run_of(local, mode="sync", shards=2, workers=2),
    "mlp, easgd, 1 worker": run_of(local, mode="easgd", shards=2, workers=1,
                                   tau=4),
    "cnn, async, 1 worker": run_of(cnn, mode="async", shards=2, workers=1),
    "click, async, 1 worker": run_of(click, mode="async", shards=2,
                                     workers=1),
}


def tensors(path):
    """A safetensors file's tensors: name -> (dtype, shape, bytes)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], v["shape"],
                data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def train(build, name, cfg):
    folder = f"{work}/{name.replace(', ', '-').replace(' ', '-')}"
    os.makedirs(folder, exist_ok=True)
    cfg = dict(cfg, training=dict(cfg["training"], checkpoint={
        "dir": f"{folder}/ckpt", "resume": False}))
    path = f"{folder}/run.json"
    json.dump(cfg, open(path, "w"))
    subprocess.run([f"{build}/apps/troupe-node", "--config", path],
                   check=True, capture_output=True, text=True, timeout=600)
    ckpts = sorted((f for f in os.listdir(f"{folder}/ckpt")
                    if f.endswith(".safetensors")),
                   key=lambda f: int(f.split("-")[1].split(".")[0]))
    newest = ckpts[-1].split(".")[0]
    # The dense checkpoint, and its tables' file beside it (a click model).
    out = {}
    for f in ckpts:
        if f.split(".")[0] == newest:
            out.update({f"{f}:{k}": v
                        for k, v in tensors(f"{folder}/ckpt/{f}").items()})
    return out, newest


differ = 0
for name, cfg in configs.items():
    a, file_a = train(after, name + " after", cfg)
    b, file_b = train(before, name + " before", cfg)
    same = a == b and file_a == file_b
    differ += not same
    floats = sum(len(v[2]) for v in a.values()) // 4
    print(f"{name:24} {file_a:8} {len(a):3} tensors, {floats:9} values: "
          f"{'bitwise equal' if same else 'DIFFER'}")
sys.exit(1 if differ else 0)
PY
