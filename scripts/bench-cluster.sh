#!/usr/bin/env bash
# The cost of the actor layer: samples/s of the in-process cluster with 1
# worker and 1 shard (troupe-node) next to the single-process training
# command (troupe-train) on the same config (config/local.json: MLP
# 784-256-128-10, batch 128, Adam), alternating over several rounds; prints
# the medians and their ratio. Both evaluate only at the end, so neither
# pays for evaluation while it trains.
# Usage: scripts/bench-cluster.sh [epochs, default 3] [rounds, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
epochs="${1:-3}"
rounds="${2:-3}"
cfg="$(mktemp --suffix .json)"
trap 'rm -f "$cfg"' EXIT
python3 - "$epochs" >"$cfg" <<'PY'
import json, sys
c = json.load(open("config/local.json"))
c["training"]["epochs"] = int(sys.argv[1])
c["training"]["eval_every_steps"] = 10**9  # only at the end
print(json.dumps(c))
PY
train=() node=()
for ((round = 1; round <= rounds; ++round)); do
  t="$("$TROUPE_BUILD/apps/troupe-train" --config "$cfg" | tail -1 \
       | sed -n 's/.* \([0-9.]*\) examples\/sec.*/\1/p')"
  n="$("$TROUPE_BUILD/apps/troupe-node" --config "$cfg" --workers 1 \
       --shards 1 | tail -1 | awk '{print $8}')"
  echo "round $round: troupe-train $t, troupe-node (1 worker, 1 shard) $n samples/s" >&2
  train+=("$t") node+=("$n")
done
python3 - "${train[*]}" "${node[*]}" <<'PY'
import sys
from statistics import median
t = median(float(x) for x in sys.argv[1].split())
n = median(float(x) for x in sys.argv[2].split())
print(f"troupe-train {t:.0f} samples/s, troupe-node 1 worker 1 shard "
      f"{n:.0f} samples/s: ratio {n / t:.2f}")
PY
