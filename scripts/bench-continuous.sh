#!/usr/bin/env bash
# Continuous training on a drifting stream (docs/sparse.md, "Continuous
# training"): troupe's click model follows a folder of click-log parts
# (data.follow), scoring each part before it trains on it (progressive
# validation), on four troupe-node processes (ps0: the chief and shard 0,
# ps1: shard 1, w0 and w1: a worker each), with its table
#   - unbounded (every id ever seen keeps its row),
#   - capped: evict.max_rows per shard so that both shards hold a quarter
#     of the ids the unbounded run saw (lru),
#   - aged: evict.steps_to_live of a twentieth of the run's pushes,
#   - admitted: admit.min_count 2,
# one run each, in that order (the bounds come from the unbounded run).
# Prints per run the samples/s (and the ratio to unbounded), the rows at
# the end and their share of the ids ever seen, ps1's resident memory at
# a quarter, half and the end of the run and its growth over the second
# half (what stays flat once a table is full), the progressive log-loss
# over every part and the samples-weighted mean of the parts' AUCs, and
# the test log-loss and AUC on logs drawn as the stream stands at its end.
# Data: troupe-clicks --drift 5 (every 1000 logs each field's Zipf ranks
# move on to 5 new values) of 10M values a field (Zipf 1.1: a long tail,
# most of it seen once), written once into runs/bench-continuous-N; every
# part is in the folder from the start, so the chief takes each as
# training needs it (a backlog, as after an outage).
# Usage: scripts/bench-continuous.sh [training logs, default 20000000]
#        [parts, default 40] [values a field, default 10000000]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
lines="${1:-20000000}"
parts="${2:-40}"
values="${3:-10000000}"
data="$TROUPE_ROOT/runs/bench-continuous-$lines-$parts-$values"
if [[ ! -f "$data/test.tsv" ]]; then
  "$TROUPE_BUILD/apps/troupe-clicks" --out "$data" --train "$lines" \
    --test 50000 --numeric 2 --categorical 4 --values "$values" --zipf 1.1 \
    --drift 5 --parts "$parts" --seed 5
fi
exec /usr/bin/python3 - "$data" <<'PY'
import json, os, re, subprocess, sys, threading, time
sys.path.insert(0, "scripts")
from benchlib import rss_kib, scratch_dir, two_shards_two_workers

data = sys.argv[1]
node = os.path.join(os.environ["TROUPE_BUILD"], "apps", "troupe-node")
work = scratch_dir()


def at_fraction(samples, fraction):
    """ps1's KiB when the run was `fraction` through."""
    end = samples[-1][0]
    return next(k for t, k in samples if t >= fraction * end)


def run(name, embedding):
    """One run across four processes; its figures."""
    folder = os.path.join(work, name.split()[0])
    os.makedirs(folder, exist_ok=True)
    nodes = two_shards_two_workers()
    config = os.path.join(folder, "cluster.json")
    with open(config, "w") as f:
        json.dump({
            "name": "continuous-" + name.split()[0],
            "model": {"type": "click", "hidden": [64, 32], "seed": 1,
                      "embedding": embedding},
            "data": {"format": "click", "dir": data,
                     "train": "train-*.tsv", "test": "test.tsv",
                     "numeric": 2, "categorical": 4,
                     "vocabulary": 1 << 30,
                     "follow": {"poll_seconds": 1,
                                "stop_after_idle_seconds": 2}},
            "training": {"batch_size": 256, "threads": 1,
                         "log_every_steps": 1000000,
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
    out, _ = chief.communicate(timeout=4 * 3600)
    done.set()
    watcher.join()
    for p in procs:
        p.wait(timeout=600)
    if chief.returncode != 0:
        sys.exit(f"{name} failed:\n{out[-3000:]}")
    with open(os.path.join(folder, "chief.log"), "w") as f:
        f.write(out)
    test = re.findall(r"test loss = ([0-9.]+), test AUC = ([0-9.]+)", out)
    parts = re.findall(r"progressive log-loss = ([0-9.]+), AUC = ([0-9.]+) "
                       r"over (\d+) samples before", out)
    scored = sum(int(n) for _, _, n in parts)
    stream = re.search(r"stream: \d+ parts trained; progressive log-loss = "
                       r"([0-9.]+)", out)
    seconds = [float(s) for s in re.findall(r"before training on it "
                                            r"\(([0-9.]+) s\)", out)]
    summary = [l for l in out.splitlines() if l.startswith("continuous-")]
    rows = sum(int(re.search(r"shard %d: (\d+) table rows" % s, out).group(1))
               for s in (0, 1))
    pushes = re.findall(r"shard versions at the end: (\d+)", out)
    trained = re.findall(r"samples trained per epoch: (\d+)", out)
    return {"rate": float(summary[-1].split()[7]), "rows": rows,
            "parts": len(parts),
            "trained": int(trained[-1]) if trained else 0,
            "progressive_loss": float(stream.group(1)),
            "parts_loss": sum(float(l) * int(n) for l, _, n in parts)
                          / scored,
            "parts_auc": sum(float(a) * int(n) for _, a, n in parts)
                         / scored,
            "score_seconds": sum(seconds),
            "test_loss": float(test[-1][0]), "test_auc": float(test[-1][1]),
            "quarter_mib": at_fraction(samples, 0.25) / 1024,
            "half_mib": at_fraction(samples, 0.5) / 1024,
            "end_mib": samples[-1][1] / 1024,
            "pushes": int(pushes[-1]) if pushes else 0}


results = {"unbounded": run("unbounded", {"dim": 8})}
first = results["unbounded"]
cap = max(100, first["rows"] // 8)  # a quarter, over two shards
ttl = max(10, first["pushes"] // 20)
for name, embedding in [
        (f"capped ({cap} rows a shard, lru)",
         {"dim": 8, "evict": {"max_rows": cap}}),
        (f"aged ({ttl} steps to live)",
         {"dim": 8, "evict": {"steps_to_live": ttl}}),
        ("admitted (min_count 2)",
         {"dim": 8, "admit": {"min_count": 2,
                              "expected_keys": first["rows"]}})]:
    results[name] = run(name, embedding)

print(f"{data}: {first['parts']} parts, {first['trained']} samples, "
      f"{first['rows']} ids seen; scoring the parts took "
      f"{first['score_seconds']:.0f} s of the unbounded run")
print(f"{'run':<36} {'samples/s':>9} {'ratio':>6} {'rows':>9} {'of ids':>6} "
      f"{'ps1 MiB 1/4':>11} {'1/2':>6} {'end':>6} {'2nd half':>8} "
      f"{'prog. loss':>10} {'parts loss':>10} {'parts AUC':>9} "
      f"{'test loss':>9} {'test AUC':>8}")
for name, r in results.items():
    print(f"{name:<36} {r['rate']:>9.0f} {r['rate'] / first['rate']:>6.2f} "
          f"{r['rows']:>9} {r['rows'] / first['rows']:>6.2f} "
          f"{r['quarter_mib']:>11.0f} {r['half_mib']:>6.0f} "
          f"{r['end_mib']:>6.0f} {r['end_mib'] - r['half_mib']:>+8.0f} "
          f"{r['progressive_loss']:>10.4f} {r['parts_loss']:>10.4f} "
          f"{r['parts_auc']:>9.4f} {r['test_loss']:>9.4f} "
          f"{r['test_auc']:>8.4f}")
print("prog. loss: every sample's log-loss before the step that trained on "
      "it (the run's metric); parts: each part scored whole before its first "
      "step (AUC: the parts' samples-weighted mean); ps1 MiB: its resident "
      "memory a quarter, half way and at the end of the run; 2nd half: its "
      "growth from half way to the end")
PY
