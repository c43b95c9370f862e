#!/usr/bin/env bash
# A table of 50M rows x 16 floats trained across 4 shards in one process.
# Writes 8M training and 100k test click logs into DIR once (troupe-clicks:
# 2 numeric and 16 categorical fields of 3.6M nearly uniform values each,
# about 51M distinct (field, value) rows; 2.3 GB of text), then trains the
# click model on an embedded cluster of 4 shards and 2 async workers
# (Adagrad rows of 16 floats: values and accumulator) for one epoch, which
# ends with a checkpoint, and resumes from it for a second epoch, which
# puts the table back on the shards first. Prints what the runs said about
# the table: each shard's rows and memory, the checkpoint's time and size,
# the restore's time, and the process's peak memory (GNU time).
# Needs about 11 GiB of memory and 21 GB of disk in DIR.
# Usage: scripts/clicks-scale.sh [DIR, default runs/clicks-scale]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# GNU time, for the peak memory.
troupe_install_missing time
troupe_setup
dir="${1:-$TROUPE_ROOT/runs/clicks-scale}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
if [[ ! -f "$dir/test.tsv" ]]; then
  "$TROUPE_BUILD/apps/troupe-clicks" --out "$dir" --train 8000000 \
    --test 100000 --numeric 2 --categorical 16 --values 3600000 \
    --zipf 0.01 --multi-valued 0 --seed 5
fi
rm -rf "$dir/ckpt"
cat >"$dir/scale.json" <<JSON
{
  "name": "clicks-50m",
  "model": { "type": "click", "hidden": [64, 32], "seed": 1,
             "embedding": { "dim": 16 } },
  "data": { "format": "click", "dir": "$dir", "train": "train.tsv",
            "test": "test.tsv", "numeric": 2, "categorical": 16,
            "vocabulary": 17179869184 },
  "training": {
    "batch_size": 512, "epochs": 1, "threads": 1, "log_every_steps": 4000,
    "optimizer": { "type": "adam", "learning_rate": 0.001 },
    "sparse_optimizer": { "type": "adagrad", "learning_rate": 0.05 },
    "checkpoint": { "dir": "$dir/ckpt", "resume": true }
  },
  "cluster": { "shards": 4, "workers": 2, "mode": "async" }
}
JSON
for epochs in 1 2; do
  echo "== epoch $epochs"
  /usr/bin/time -f "peak memory of the process: %M KiB, %e s" \
    "$TROUPE_BUILD/apps/troupe-node" --config "$dir/scale.json" \
    --epochs "$epochs" 2>&1 | tee "$dir/epoch-$epochs.log" \
    | grep -E "resuming|tables restored|test AUC|checkpoint|^shard|peak|^clicks"
done
