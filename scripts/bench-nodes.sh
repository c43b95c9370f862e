#!/usr/bin/env bash
# Samples/s of the 784-256-128-10 MLP (config/local.json: batch 128, Adam,
# async) for 1, 2 and 4 workers against 1 and 2 shards, each worker and
# each shard its own troupe-node process on 127.0.0.1 (plus the chief's),
# their data plane through shared memory (the default on one host) and
# over TCP ("shared_memory": false), next to the same cluster inside one
# process, alternating, REPEATS times each; medians, and their ratios to
# one process, and the median test accuracy of the processes through shared
# memory and of one process (async workers across processes prefetch and
# look ahead by default: cluster.prefetch "auto"). Evaluation only at the
# end.
# Usage: scripts/bench-nodes.sh [epochs, default 2] [workers, default "1 2 4"]
#                              [shards, default "1 2"] [repeats, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
epochs="${1:-2}"
worker_counts="${2:-1 2 4}"
shard_counts="${3:-1 2}"
repeats="${4:-3}"
median() { tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
node="$TROUPE_BUILD/apps/troupe-node"
printf "%7s %6s %18s %16s %18s %7s %7s %11s %9s\n" workers shards "shared mem. (s/s)" "TCP (s/s)" "one process (s/s)" "shared" "TCP" "acc shared" "acc one"
for shards in $shard_counts; do
  for workers in $worker_counts; do
    python3 - "$epochs" "$shards" "$workers" "$work" <<'PY'
import sys
from benchlib import write_local_clusters
epochs, shards, workers, work = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
members = write_local_clusters("config/local.json", work, epochs, shards, workers)
open(f"{work}/members", "w").write(" ".join(members))
import json
cluster = json.load(open(f"{work}/cluster.json"))
cluster["cluster"]["shared_memory"] = False
json.dump(cluster, open(f"{work}/cluster-tcp.json", "w"))
PY
    multis=() tcps=() singles=() multi_accs=() single_accs=()
    # One run of the cluster of file $1: its samples/s and test accuracy.
    processes() {
      for m in $(cat "$work/members"); do
        "$node" --config "$1" --node "$m" >/dev/null 2>&1 &
      done
      "$node" --config "$1" --node chief | grep -A1 '^run ' | tail -1 | awk '{print $8, $9}'
      wait
    }
    for ((r = 1; r <= repeats; ++r)); do
      read -r rate acc < <(processes "$work/cluster.json")
      multis+=("$rate") multi_accs+=("$acc")
      read -r rate acc < <(processes "$work/cluster-tcp.json")
      tcps+=("$rate")
      read -r rate acc < <("$node" --config "$work/one.json" | grep -A1 '^run ' \
                             | tail -1 | awk '{print $8, $9}')
      singles+=("$rate") single_accs+=("$acc")
    done
    multi="$(echo "${multis[*]}" | median)"
    tcp="$(echo "${tcps[*]}" | median)"
    single="$(echo "${singles[*]}" | median)"
    ratio_of() { awk -v m="$1" -v s="$single" 'BEGIN { if (s > 0) printf "%.2f", m / s; else print "-" }'; }
    printf "%7d %6d %18s %16s %18s %7s %7s %11s %9s\n" "$workers" "$shards" "$multi" "$tcp" "$single" \
      "$(ratio_of "$multi")" "$(ratio_of "$tcp")" \
      "$(echo "${multi_accs[*]}" | median)" "$(echo "${single_accs[*]}" | median)"
  done
done
