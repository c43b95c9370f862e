#!/usr/bin/env bash
# Set up (install what is missing, build), then run the main job on the
# embedded default config, config/local.json. Extra arguments go to the
# training command, e.g. scripts/run.sh --epochs 2.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
exec "$TROUPE_BUILD/apps/troupe-train" --config "$TROUPE_ROOT/config/local.json" "$@"
