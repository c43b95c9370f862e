#!/usr/bin/env bash
# Samples/s of the 784-256-128-10 MLP (config/local.json: batch 128, Adam,
# async) for 1, 2 and 4 workers against 1 and 2 shards, each worker and
# each shard its own troupe-node process on 127.0.0.1 (plus the chief's),
# next to the same cluster inside one process, alternating, REPEATS times
# each; medians, and their ratio. Evaluation only at the end.
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
printf "%7s %6s %16s %18s %6s\n" workers shards "processes (s/s)" "one process (s/s)" ratio
for shards in $shard_counts; do
  for workers in $worker_counts; do
    python3 - "$epochs" "$shards" "$workers" "$work" <<'PY'
import sys
from benchlib import write_local_clusters
epochs, shards, workers, work = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
members = write_local_clusters("config/local.json", work, epochs, shards, workers)
open(f"{work}/members", "w").write(" ".join(members))
PY
    multis=() singles=()
    for ((r = 1; r <= repeats; ++r)); do
      for m in $(cat "$work/members"); do
        "$node" --config "$work/cluster.json" --node "$m" >/dev/null 2>&1 &
      done
      multis+=("$("$node" --config "$work/cluster.json" --node chief \
                 | grep -A1 '^run ' | tail -1 | awk '{print $8}')")
      wait
      singles+=("$("$node" --config "$work/one.json" | grep -A1 '^run ' \
                  | tail -1 | awk '{print $8}')")
    done
    multi="$(echo "${multis[*]}" | median)"
    single="$(echo "${singles[*]}" | median)"
    ratio="$(awk -v m="$multi" -v s="$single" 'BEGIN { if (s > 0) printf "%.2f", m / s; else print "-" }')"
    printf "%7d %6d %16s %18s %6s\n" "$workers" "$shards" "$multi" "$single" "$ratio"
  done
done
