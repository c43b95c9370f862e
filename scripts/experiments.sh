#!/usr/bin/env bash
# The experiments behind the cluster tables of docs/benchmarks.md, in one go:
# 1. the distributed TensorFlow MNIST tutorial's experiment (784-100-10
#    sigmoid, normal(0,1) weights, SGD lr 0.001, batch 100, 20 epochs,
#    async) with 1, 2 and 3 workers, on Fashion-MNIST (config/tf-tutorial.json):
#    data_partition replicated (each worker its own 20 epochs, as the
#    tutorial's between-graph workers), then shared (20 epochs for the
#    cluster) for comparison;
# 2. the four consistency modes side by side on the 784-256-128-10 MLP with
#    2 workers (config/local.json, 10 epochs, evaluated every 200 steps).
# Prints two markdown tables: final accuracy, time to 0.85 test accuracy,
# samples/s. Metrics and plots land in runs/experiments/.
# Usage: scripts/experiments.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
out=runs/experiments
rm -rf "$out"
mkdir -p "$out/tutorial" "$out/modes"
node="$TROUPE_BUILD/apps/troupe-node"
summary_line() { tail -1 "$1"; }
for part in replicated shared; do
  for w in 1 2 3; do
    python3 - "$w" "$part" <<'PY' >"$out/tutorial/cfg-$part-$w.json"
import json, sys
c = json.load(open("config/tf-tutorial.json"))
c["name"] = f"tutorial-{sys.argv[2]}-{sys.argv[1]}-workers"
c["cluster"]["workers"] = int(sys.argv[1])
c["training"]["data_partition"] = sys.argv[2]
print(json.dumps(c))
PY
    "$node" --config "$out/tutorial/cfg-$part-$w.json" \
      --metrics-dir "$out/tutorial" >"$out/tutorial/log-$part-$w.txt"
  done
done
for mode in async sync ssp easgd; do
  python3 - "$mode" <<'PY' >"$out/modes/cfg-$mode.json"
import json, sys
c = json.load(open("config/local.json"))
c["name"] = f"mlp-{sys.argv[1]}"
c["training"]["eval_every_steps"] = 200
c["cluster"]["mode"] = sys.argv[1]
print(json.dumps(c))
PY
  "$node" --config "$out/modes/cfg-$mode.json" --metrics-dir "$out/modes" \
    >"$out/modes/log-$mode.txt"
done
scripts/plot.sh "$out/tutorial" >/dev/null
scripts/plot.sh "$out/modes" >/dev/null
python3 - "$out" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
def metrics_of(prefix):
    # <name>-<run id>.csv: the one run of that name in the folder.
    found = [f for f in glob.glob(prefix + "-*.csv")
             if not f.endswith(".progress.csv")]
    assert len(found) == 1, found
    return found[0]
def row(log, metrics):
    # The summary table's last line: run mode workers shards steps epochs
    # seconds examples/s test-acc restarts.
    f = open(log).read().strip().splitlines()[-1].split()
    reach = "-"
    for r in csv.DictReader(open(metrics)):
        if float(r["test_accuracy"]) >= 0.85:
            reach = f'{float(r["seconds"]):.1f} s (step {r["step"]})'
            break
    return f[1], f[2], f[8], reach, float(f[7]), f[6]
print("| experiment | mode | workers | final test accuracy | time to 0.85 | samples/s | seconds |")
print("|---|---|---|---|---|---|---|")
for part in ("replicated", "shared"):
    for w in (1, 2, 3):
        m, n, acc, reach, sps, sec = row(
            f"{out}/tutorial/log-{part}-{w}.txt",
            metrics_of(f"{out}/tutorial/tutorial-{part}-{w}-workers"))
        print(f"| TF tutorial 784-100-10 sigmoid, SGD 0.001, 20 epochs | {m}, {part} | {n} | {acc} | {reach} | {sps:.0f} | {sec} |")
for mode in ("async", "sync", "ssp", "easgd"):
    m, n, acc, reach, sps, sec = row(f"{out}/modes/log-{mode}.txt",
                                     metrics_of(f"{out}/modes/mlp-{mode}"))
    print(f"| MLP 784-256-128-10, Adam 0.001, 10 epochs | {m} | {n} | {acc} | {reach} | {sps:.0f} | {sec} |")
PY
