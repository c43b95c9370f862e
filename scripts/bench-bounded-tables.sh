#!/usr/bin/env bash
# Tables that stay bounded on a drifting stream (docs/sparse.md, "Tables
# that stay bounded"): troupe's click model on click logs whose popular
# values move on as the stream goes (troupe-clicks --drift), trained once
# in stream order over its parts, on four troupe-node processes (ps0: the
# chief and shard 0, ps1: shard 1, w0 and w1: a worker each), with its
# table
#   - unbounded (every id ever seen keeps its row),
#   - capped: evict.max_rows per shard at a quarter of the rows the
#     unbounded run ends with (lru),
#   - aged: evict.steps_to_live of a tenth of the run's pushes,
#   - admitted: admit.min_count 2,
# in turns for `repeats` rounds. Prints per run the median samples/s (and
# the ratio to unbounded), the rows at the end, the table's bytes on both
# shards at the end, a shard node's peak resident memory and how it grew
# over the second half of the run (what stays flat once the table is
# full), the test log-loss and AUC on the logs that follow the stream, and
# the rows not admitted and evicted.
# Data: troupe-clicks --drift 5 (every 1000 logs each field's Zipf ranks
# move on to 5 new values, so a popular value fades over some 200k logs)
# of 100k values a field (Zipf 1.2: much of the tail comes once), written once into
# runs/bench-bounded-N. Memory is ps1's, which holds shard 1 alone (ps0
# also holds the training set).
# Usage: scripts/bench-bounded-tables.sh [training logs, default 2000000]
#        [parts, default 40] [repeats, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
lines="${1:-2000000}"
parts="${2:-40}"
data="$TROUPE_ROOT/runs/bench-bounded-$lines"
if [[ ! -f "$data/test.tsv" ]]; then
  "$TROUPE_BUILD/apps/troupe-clicks" --out "$data" --train "$lines" \
    --test 50000 --numeric 2 --categorical 4 --values 100000 --zipf 1.2 --drift 5 \
    --parts "$parts" --seed 5
fi
exec /usr/bin/python3 - "$data" "${3:-3}" <<'PY'
import json, os, re, statistics, subprocess, sys, threading, time
sys.path.insert(0, "scripts")
from benchlib import rss_kib, scratch_dir, two_shards_two_workers

data, repeats = sys.argv[1], int(sys.argv[2])
node = os.path.join(os.environ["TROUPE_BUILD"], "apps", "troupe-node")
work = scratch_dir()
results = {}


def run(name, embedding, round_no):
    """One run across four processes; its figures."""
    folder = os.path.join(work, f"{name}-{round_no}")
    os.makedirs(folder, exist_ok=True)
    nodes = two_shards_two_workers()
    config = os.path.join(folder, "cluster.json")
    with open(config, "w") as f:
        json.dump({
            "name": "bounded-" + name.split()[0],
            "model": {"type": "click", "hidden": [64, 32], "seed": 1,
                      "embedding": embedding},
            "data": {"format": "click", "dir": data,
                     "train": "train-*.tsv", "test": "test.tsv",
                     "read": "memory", "numeric": 2, "categorical": 4,
                     "vocabulary": 1 << 30},
            "training": {"batch_size": 256, "epochs": 1, "threads": 1,
                         "order": "stream", "log_every_steps": 1000000,
                         "optimizer": {"type": "adam", "learning_rate": 0.001},
                         "sparse_optimizer": {"type": "adagrad",
                                              "learning_rate": 0.05}},
            "cluster": {"mode": "async", "nodes": nodes}}, f)
    procs = [subprocess.Popen([node, "--config", config, "--node", n["name"]],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for n in nodes[1:]]
    chief = subprocess.Popen([node, "--config", config, "--node", "ps0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    samples = []  # (seconds, ps1 KiB)
    began = time.time()
    done = threading.Event()

    def watch():
        while not done.wait(0.5):
            kib = rss_kib(procs[0].pid)  # ps1
            if kib:
                samples.append((time.time() - began, kib))
    watcher = threading.Thread(target=watch)
    watcher.start()
    out, _ = chief.communicate(timeout=3600)
    done.set()
    watcher.join()
    for p in procs:
        p.wait(timeout=600)
    if chief.returncode != 0:
        sys.exit(f"{name} failed:\n{out[-3000:]}")
    scores = re.findall(r"test loss = ([0-9.]+), test AUC = ([0-9.]+)", out)
    summary = [l for l in out.splitlines() if l.startswith("bounded-")]
    rate = float(summary[-1].split()[7])
    rows = [int(re.search(r"shard %d: (\d+) table rows" % s, out).group(1))
            for s in (0, 1)]
    rejected = evicted = 0
    for m in re.finditer(r"rows made \d+, not admitted (\d+), evicted (\d+)",
                         out):
        rejected += int(m.group(1))
        evicted += int(m.group(2))
    pushes = re.findall(r"shard versions at the end: (\d+)", out)
    table_bytes = sum(float(g) for g in re.findall(
        r"shard \d: \d+ table rows in ([0-9.]+) GiB", out)) * 2**30
    # ps1's memory over the run, and its growth over the second half
    # (flat once a bounded table is full).
    half = ([kib for t, kib in samples if t >= samples[-1][0] / 2]
            if samples else [0])
    return {"rate": rate, "rows": sum(rows), "table_mib": table_bytes / 2**20,
            "loss": float(scores[-1][0]),
            "auc": float(scores[-1][1]),
            "peak_mib": max(k for _, k in samples) / 1024 if samples else 0,
            "late_growth_mib": (half[-1] - half[0]) / 1024,
            "rejected": rejected, "evicted": evicted,
            "pushes": int(pushes[-1]) if pushes else 0}


variants = [("unbounded", {"dim": 8})]
for round_no in range(repeats):
    for name, embedding in list(variants):
        results.setdefault(name, []).append(run(name, embedding, round_no))
    if round_no == 0:
        # The bounds are set from what the unbounded run held and pushed.
        first = results["unbounded"][0]
        cap = max(100, first["rows"] // 8)  # a quarter, over two shards
        ttl = max(10, first["pushes"] // 10)
        variants += [
            (f"capped ({cap} rows a shard, lru)",
             {"dim": 8, "evict": {"max_rows": cap}}),
            (f"aged ({ttl} steps to live)",
             {"dim": 8, "evict": {"steps_to_live": ttl}}),
            ("admitted (min_count 2)",
             {"dim": 8, "admit": {"min_count": 2,
                                  "expected_keys": first["rows"] // 2}}),
        ]
        for name, embedding in variants[1:]:
            results.setdefault(name, []).append(run(name, embedding, 0))

print(f"{repeats} round(s) of {data}; medians")
base = statistics.median(r["rate"] for r in results["unbounded"])
print(f"{'run':<34} {'samples/s':>9} {'ratio':>6} {'rows':>9} "
      f"{'table MiB':>9} {'ps1 peak':>8} {'2nd half':>8} "
      f"{'log-loss':>8} {'AUC':>7} {'not admitted':>12} {'evicted':>9}")
for name, rs in results.items():
    med = lambda key: statistics.median(r[key] for r in rs)
    print(f"{name:<34} {med('rate'):>9.0f} {med('rate') / base:>6.2f} "
          f"{med('rows'):>9.0f} {med('table_mib'):>9.1f} "
          f"{med('peak_mib'):>8.0f} {med('late_growth_mib'):>+8.0f} "
          f"{med('loss'):>8.4f} {med('auc'):>7.4f} "
          f"{med('rejected'):>12.0f} {med('evicted'):>9.0f}")
print("table MiB: both shards' rows at the end (values, Adagrad state, "
      "index; from the summary's GiB, two decimals); ps1 peak: its resident MiB; 2nd half: how much it grew "
      "over the second half of the run")
PY
