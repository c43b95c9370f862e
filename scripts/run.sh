#!/usr/bin/env bash
# Set up what the main job needs (install the packages missing for it,
# build troupe-node and troupe-shell; scripts/test.sh adds the rest), then
# run the main job: the actor cluster on the embedded default config,
# config/local.json (chief, 2 shards, 2 workers and the feeder in one
# process), then plot its test accuracy and loss (and those of earlier runs
# in runs/) into runs/metrics.png. It listens for troupe-shell on a free
# loopback port (printed; TROUPE_LISTEN=HOST:PORT chooses one), and serves
# the run's page and metrics on another ("page: http://127.0.0.1:PORT/";
# TROUPE_PAGE=HOST:PORT chooses it). Extra
# arguments go to troupe-node, e.g. scripts/run.sh --epochs 2.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup run
cd "$TROUPE_ROOT"
"$TROUPE_BUILD/apps/troupe-node" --config config/local.json \
  --metrics-dir runs --listen "${TROUPE_LISTEN:-127.0.0.1:0}" \
  --metrics-listen "${TROUPE_PAGE:-127.0.0.1:0}" "$@"
scripts/plot.sh runs
