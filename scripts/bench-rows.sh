#!/usr/bin/env bash
# Sparse pulls and pushes of embedding rows between two processes on
# 127.0.0.1, side by side in one run: troupe's shard on its data plane
# (bench-rows) and ps-lite's ZPull/ZPush (1 server, 1 worker,
# scripts/bench-pslite.sh --rows; built beside the project from a ps-lite
# checkout, see scripts/build-pslite.sh), with the same keys, in batches of
# 1k and 100k distinct ids of 16 floats each, drawn from a vocabulary of
# VOCABULARY ids (default 1M: after the warm-up most rows exist, as in
# training; a large one makes most pulls create their rows). Runs
# alternate; medians over REPEATS. Prints rows pulled+pushed per second on
# each side and troupe's over ps-lite's (above 1: troupe ahead).
# Usage: scripts/bench-rows.sh [repeats, default 3]
# Environment: VOCABULARY (default 1000000), TLS=DIR (troupe's link with
# mutual TLS from DIR, made by scripts/make-certs.sh DIR bench; ps-lite has
# no TLS).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
repeats="${1:-3}"
vocabulary="${VOCABULARY:-1000000}"
bench="$TROUPE_BUILD/apps/bench-rows"
tls=()
[ -n "${TLS:-}" ] && tls=(--tls "$TLS")
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
rate_of() { sed -n 's/.* \([0-9.]*\) M rows\/s.*/\1/p'; }
for ((r = 1; r <= repeats; ++r)); do
  for spec in "1000 2000 200" "100000 40 10"; do
    set -- $spec
    opts=(--ids "$1" --dim 16 --rounds "$2" --warmup "$3"
          --vocabulary "$vocabulary" --seed "$r")
    echo "troupe $1 $("$bench" "${opts[@]}" "${tls[@]}" | rate_of)" >>"$results"
    echo "pslite $1 $("$TROUPE_ROOT/scripts/bench-pslite.sh" --rows "${opts[@]}" | rate_of)" >>"$results"
  done
done
python3 - "$results" "$vocabulary" <<'PY'
import sys
from statistics import median
from benchlib import read_results
vals = read_results(sys.argv[1], 2)
print(f"rows of 16 floats, ids drawn from {int(sys.argv[2]):,}; "
      "M rows/s pulled+pushed by one worker from one shard (medians)")
print(f"{'ids per request':>15} {'troupe':>8} {'ps-lite':>8} {'troupe/ps-lite':>15}")
for ids in ("1000", "100000"):
    t, p = vals.get(("troupe", ids)), vals.get(("pslite", ids))
    if not t or not p:
        print(f"{ids:>15} {'-':>8} {'-':>8} {'-':>15}")
        continue
    print(f"{ids:>15} {median(t):>8.2f} {median(p):>8.2f} {median(t) / median(p):>15.2f}")
PY
