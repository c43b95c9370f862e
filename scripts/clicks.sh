#!/usr/bin/env bash
# The click model's learning run: writes 1M training and 100k test click
# logs drawn from a planted model (troupe-clicks: 2 numeric and 4
# categorical fields of 200 Zipf values each, seed 3) into DIR, a run
# config beside them (embedded cluster: 2 shards holding the table and
# the MLP, 2 workers, async, 6 epochs), and trains it with troupe-node.
# The planted model's test log-loss and AUC are printed first; the run's
# evaluation lines end with its own ("test loss" is the log-loss).
# Usage: scripts/clicks.sh [DIR, default runs/clicks] [troupe-node options]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
dir="${1:-$TROUPE_ROOT/runs/clicks}"
shift $(($# > 0 ? 1 : 0))
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
"$TROUPE_BUILD/apps/troupe-clicks" --out "$dir" --train 1000000 \
  --test 100000 --numeric 2 --categorical 4 --values 200 --seed 3
cat >"$dir/clicks.json" <<JSON
{
  "name": "clicks",
  "model": { "type": "click", "hidden": [64, 32], "seed": 1,
             "embedding": { "dim": 8 } },
  "data": { "format": "click", "dir": "$dir", "train": "train.tsv",
            "test": "test.tsv", "numeric": 2, "categorical": 4,
            "vocabulary": 4194304 },
  "training": {
    "batch_size": 256, "epochs": 6, "threads": 1, "log_every_steps": 4000,
    "optimizer": { "type": "adam", "learning_rate": 0.001 },
    "sparse_optimizer": { "type": "adagrad", "learning_rate": 0.05 }
  },
  "cluster": { "shards": 2, "workers": 2, "mode": "async" }
}
JSON
"$TROUPE_BUILD/apps/troupe-node" --config "$dir/clicks.json" "$@"
