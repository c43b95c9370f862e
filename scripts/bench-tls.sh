#!/usr/bin/env bash
# Pull+push round trips of 40 KB, 4 MB and 100 MB float buffers between two
# processes on 127.0.0.1 with mutual TLS next to without, side by side in
# one run (bench-transfer --tls), through the data plane and through CAF's
# own connection (BASP). Runs alternate; medians over REPEATS. Prints ms
# per round trip and TLS's time over plaintext's (1.00: TLS costs nothing).
# Usage: scripts/bench-tls.sh [repeats, default 5]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
repeats="${1:-5}"
bench="$TROUPE_BUILD/apps/bench-transfer"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$TROUPE_ROOT/scripts/make-certs.sh" "$work/certs" bench >/dev/null
results="$work/results"
ms_of() { sed -n 's/.*: \([0-9.]*\) ms per pull+push.*/\1/p'; }
for ((r = 1; r <= repeats; ++r)); do
  for spec in "10000 2000" "1000000 100" "25000000 10"; do
    set -- $spec
    for via in data basp; do
      echo "plain $via $1 $("$bench" --floats "$1" --rounds "$2" --via "$via" | ms_of)" >>"$results"
      echo "tls $via $1 $("$bench" --floats "$1" --rounds "$2" --via "$via" --tls "$work/certs" | ms_of)" >>"$results"
    done
  done
done
python3 - "$results" <<'PY'
import sys
from statistics import median
from benchlib import read_results
vals = read_results(sys.argv[1], 3)
print(f"{'buffer':>7} {'link':>10} {'plain ms':>10} {'TLS ms':>10} {'TLS/plain':>10} {'TLS MB/s':>9}")
for via, name in (("data", "data plane"), ("basp", "BASP")):
    for floats, size in (("10000", "40 KB"), ("1000000", "4 MB"), ("25000000", "100 MB")):
        p = median(vals[("plain", via, floats)])
        t = median(vals[("tls", via, floats)])
        mbs = 2 * 4 * int(floats) / (t / 1000) / 1e6
        print(f"{size:>7} {name:>10} {p:>10.3f} {t:>10.3f} {t / p:>10.2f} {mbs:>9.0f}")
PY
