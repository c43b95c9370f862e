#!/usr/bin/env bash
# A week of simulated time (docs/sparse.md, "Continuous training"): a
# drifting click stream arrives as one part an hour, 168 parts, each
# renamed into the followed folder as a log shipper does, a simulated hour
# every `seconds_per_hour` seconds. Six troupe-node processes train it as
# it comes: the chief alone on its node, three shard nodes (a shard each,
# each with a replica on another: cluster.shard_replicas 1), two worker
# nodes. The table is capped (evict.max_rows) and exported every two
# seconds (training.export). A third of the way in, shard node ps1 is
# killed with SIGKILL and started again 3 s later; two thirds of the way
# in, the chief is killed with SIGKILL and run again once the members wait
# for it. The run ends when no part has come for 5 s.
# Checks, each printed with its figures:
#   - every part scored once before it was trained on, and trained once:
#     the samples trained are the stream's lines, the shards' versions
#     the batches of one pass;
#   - no delta lost: every export of the newest chain reads back through
#     troupe.read_export (which refuses a delta that does not follow the
#     one before it), and the last one holds the rows the shards hold;
#   - memory flat: the surviving shard nodes' resident memory at a
#     quarter, half, three quarters and the end of the stream.
# Usage: scripts/bench-stream-week.sh [lines per part, default 30000]
#        [seconds per simulated hour, default 0.5]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
per_part="${1:-30000}"
hours=168
data="$TROUPE_ROOT/runs/bench-stream-week-$per_part"
if [[ ! -f "$data/test.tsv" ]]; then
  "$TROUPE_BUILD/apps/troupe-clicks" --out "$data" \
    --train "$((per_part * hours))" --test 20000 --numeric 2 --categorical 4 \
    --values 1000000 --zipf 1.1 --drift 5 --parts "$hours" --seed 9
fi
exec /usr/bin/python3 - "$data" "$per_part" "$hours" "${2:-0.5}" <<'PY'
import glob, json, os, re, shutil, subprocess, sys, threading, time
sys.path.insert(0, "scripts")
from benchlib import free_port, rss_kib, scratch_dir
import troupe

data, per_part, hours, pace = (sys.argv[1], int(sys.argv[2]),
                               int(sys.argv[3]), float(sys.argv[4]))
node = os.path.join(os.environ["TROUPE_BUILD"], "apps", "troupe-node")
work = scratch_dir()
folder = os.path.join(work, "logs")
os.makedirs(folder)
shutil.copy(os.path.join(data, "test.tsv"), os.path.join(work, "test.tsv"))
parts = sorted(glob.glob(os.path.join(data, "train-*.tsv")))
assert len(parts) == hours, parts


def let_in(k):
    """Part k appears whole: copied aside, renamed into the folder."""
    to = os.path.join(folder, os.path.basename(parts[k]))
    shutil.copy(parts[k], to + ".partial")
    os.rename(to + ".partial", to)


names = ["chief", "ps0", "ps1", "ps2", "w0", "w1"]
nodes = []
for n in names:
    entry = {"name": n, "host": "127.0.0.1", "port": free_port()}
    if n.startswith("ps"):
        entry["shards"] = 1
    if n.startswith("w"):
        entry["workers"] = 1
    nodes.append(entry)
config = os.path.join(work, "cluster.json")
cap = 60000  # rows a shard
with open(config, "w") as f:
    json.dump({
        "name": "stream-week",
        "model": {"type": "click", "hidden": [64, 32], "seed": 1,
                  "embedding": {"dim": 8, "evict": {"max_rows": cap}}},
        "data": {"format": "click", "dir": work, "train": "logs/train-*.tsv",
                 "test": "test.tsv", "numeric": 2, "categorical": 4,
                 "vocabulary": 1 << 30,
                 "follow": {"poll_seconds": 0.25,
                            "stop_after_idle_seconds": 5}},
        "training": {"batch_size": 256, "threads": 1,
                     "log_every_steps": 1000000,
                     "optimizer": {"type": "adam", "learning_rate": 0.001},
                     "sparse_optimizer": {"type": "adagrad",
                                          "learning_rate": 0.05},
                     "checkpoint": {"dir": os.path.join(work, "ckpt"),
                                    "every_steps": 2000},
                     "export": {"dir": os.path.join(work, "exports"),
                                "every_seconds": 2}},
        "cluster": {"mode": "async", "chief": "chief", "nodes": nodes,
                    "shard_replicas": 1, "node_timeout_s": 60,
                    "max_restarts": 10}}, f)


def start(name, log):
    return subprocess.Popen([node, "--config", config, "--node", name],
                            stdout=open(os.path.join(work, log), "w"),
                            stderr=subprocess.STDOUT)


for k in range(2):
    let_in(k)
procs = {n: start(n, n + ".log") for n in names if n != "chief"}
chief = start("chief", "chief.log")


memory = []  # (hour, KiB of ps0 + ps2)
hour = 2
began = time.time()
for hour in range(2, hours):
    time.sleep(pace)
    let_in(hour)
    if hour % 6 == 0:
        kib = [rss_kib(procs[n].pid) for n in ("ps0", "ps2")]
        if all(kib):
            memory.append((hour, sum(kib)))
    if hour == hours // 3:
        procs["ps1"].kill()
        procs["ps1"].wait()
        print(f"hour {hour}: shard node ps1 killed (SIGKILL)", flush=True)
        time.sleep(3)
        procs["ps1"] = start("ps1", "ps1-again.log")
    if hour == 2 * hours // 3:
        chief.kill()
        chief.wait()
        print(f"hour {hour}: the chief killed (SIGKILL)", flush=True)
        time.sleep(2)
        chief = start("chief", "chief-again.log")
arrived = time.time() - began
if chief.wait(timeout=3600) != 0:
    sys.exit("the chief failed:\n"
             + open(os.path.join(work, "chief-again.log")).read()[-4000:])
for p in procs.values():
    p.wait(timeout=600)
first = open(os.path.join(work, "chief.log")).read()
out = open(os.path.join(work, "chief-again.log")).read()
lines = per_part * hours

scored = set(re.findall(r"part (train-\d+\.tsv): progressive", first + out))
trained = int(re.findall(r"samples trained per epoch: (\d+)", out)[-1])
versions = [int(v) for v in re.findall(
    r"shard versions at the end: ([\d ]+)", out)[-1].split()]
steps = -(-lines // 256)
print(f"{hours} parts of {per_part} lines arrived in {arrived:.0f} s; "
      f"{len(scored)} scored before training; {trained} samples trained of "
      f"{lines}; shard versions {versions} for {steps} batches")
print("kept the live shards" in out and "the chief run again kept the live "
      "shards" or "the chief run again did not keep the live shards")
ok = len(scored) == hours and trained == lines and all(
    v == steps for v in versions)

exports = os.path.join(work, "exports")
manifest = json.load(open(os.path.join(exports, "manifest.json")))
entries = manifest["exports"]
chain = [e for e in entries]
start_at = max(i for i, e in enumerate(chain) if e["kind"] == "full")
read = 0
for e in chain[start_at:]:
    troupe.read_export(exports, "embedding", e["sequence"])
    read += 1
keys, values = troupe.read_export(exports, "embedding")
rows = sum(int(r) for r in re.findall(r"shard \d: (\d+) table rows", out))
print(f"exports: {len(entries)} kept in the manifest, the newest chain's "
      f"{read} (a full one and {read - 1} deltas) all read back; its last "
      f"holds {len(keys)} rows, the shards {rows}")
ok = ok and len(keys) == rows
print("shard nodes ps0 + ps2, resident MiB by hour: "
      + ", ".join(f"{h}: {k / 1024:.0f}" for h, k in memory
                  if h % 24 == 0))
quarter = [k for h, k in memory if h >= hours // 4][0]
print(f"growth from hour {hours // 4} to the end: "
      f"{(memory[-1][1] - quarter) / 1024:+.0f} MiB")
sys.exit(0 if ok else "a check failed")
PY
