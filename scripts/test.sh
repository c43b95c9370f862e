#!/usr/bin/env bash
# Set up (install what is missing, build), then run the whole test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_BUILD"
ctest --output-on-failure -j2 "$@"
