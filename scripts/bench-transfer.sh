#!/usr/bin/env bash
# Pull+push round trips of 40 KB, 4 MB and 100 MB float buffers between two
# processes on 127.0.0.1, side by side in one run: troupe through its data
# plane (bench-transfer, what workers on other nodes use), troupe through
# CAF's own connection (--via basp), ps-lite's push+pull (1 server, 1
# worker, scripts/bench-pslite.sh; built beside the project from a ps-lite
# checkout, see scripts/build-pslite.sh), each with and without transparent
# huge pages for malloc on every side (GLIBC_TUNABLES=glibc.malloc.hugetlb=1),
# and iperf3's loopback bandwidth. Runs alternate; medians over REPEATS.
# Prints ms per round trip, ps-lite's time over troupe's (above 1: troupe
# ahead) and troupe's MB/s as a share of iperf3's.
# Usage: scripts/bench-transfer.sh [repeats, default 3]
# Without a ps-lite checkout (PSLITE_SRC, default ../ps-lite-src) or build,
# its columns read "-".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
repeats="${1:-3}"
bench="$TROUPE_BUILD/apps/bench-transfer"
huge="GLIBC_TUNABLES=glibc.malloc.hugetlb=1"
pslite_ok=1
"$TROUPE_ROOT/scripts/bench-pslite.sh" 10000 10 >/dev/null 2>&1 || pslite_ok=0
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
ms_of() { sed -n 's/.*: \([0-9.]*\) ms per pull+push.*/\1/p'; }
for ((r = 1; r <= repeats; ++r)); do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$port" -t 3 -J | python3 -c \
    'import json,sys; print("iperf3", "-", json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e6)' \
    >>"$results"
  wait
  for spec in "10000 2000" "1000000 100" "25000000 10"; do
    set -- $spec
    for pages in plain huge; do
      env_pages=()
      [ "$pages" = huge ] && env_pages=("$huge")
      echo "troupe $1 $pages $(env "${env_pages[@]}" "$bench" --floats "$1" --rounds "$2" | ms_of)" >>"$results"
      echo "basp $1 $pages $(env "${env_pages[@]}" "$bench" --floats "$1" --rounds "$2" --via basp | ms_of)" >>"$results"
      if [ "$pslite_ok" = 1 ]; then
        echo "pslite $1 $pages $(PSLITE_HUGETLB=$([ "$pages" = huge ] && echo 1 || echo 0) \
          "$TROUPE_ROOT/scripts/bench-pslite.sh" "$1" "$2" 2>/dev/null | ms_of)" >>"$results"
      fi
    done
  done
done
python3 - "$results" <<'PY'
import sys
from collections import defaultdict
from statistics import median
vals = defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 4 and parts[3] != "":
        vals[tuple(parts[:3])].append(float(parts[3]))
    elif len(parts) == 3 and parts[0] == "iperf3":
        vals[("iperf3", "-", "-")].append(float(parts[2]))
tcp = median(vals[("iperf3", "-", "-")])
print(f"loopback TCP (iperf3, one stream): {tcp:.0f} MB/s")
print(f"{'buffer':>7} {'huge pages':>10} {'troupe ms':>10} {'via BASP ms':>12} "
      f"{'ps-lite ms':>11} {'ps-lite/troupe':>15} {'troupe MB/s':>12} {'of iperf3':>10}")
for floats, name in (("10000", "40 KB"), ("1000000", "4 MB"), ("25000000", "100 MB")):
    for pages in ("plain", "huge"):
        t = median(vals[("troupe", floats, pages)])
        b = median(vals[("basp", floats, pages)])
        p = vals.get(("pslite", floats, pages))
        p_ms = f"{median(p):.3f}" if p else "-"
        ratio = f"{median(p) / t:.2f}" if p else "-"
        mbs = 2 * 4 * int(floats) / (t / 1000) / 1e6
        print(f"{name:>7} {'yes' if pages == 'huge' else 'no':>10} {t:>10.3f} {b:>12.3f} "
              f"{p_ms:>11} {ratio:>15} {mbs:>12.0f} {mbs / tcp:>10.2f}")
PY
