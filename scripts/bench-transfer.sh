#!/usr/bin/env bash
# Pull+push between two processes on 127.0.0.1 through a shard actor
# (bench-transfer) for 40 KB, 4 MB and 100 MB buffers, next to the loopback
# TCP bandwidth that iperf3 measures in the same run; medians over several
# repeats, and their ratio.
# Usage: scripts/bench-transfer.sh [repeats, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
repeats="${1:-3}"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
iperf=()
for ((r = 1; r <= repeats; ++r)); do
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  sleep 0.3
  mbs=$(iperf3 -c 127.0.0.1 -p "$port" -t 3 -J | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e6)')
  wait
  iperf+=("$mbs")
done
declare -A rows
for spec in "10000 2000" "1000000 100" "25000000 10"; do
  set -- $spec
  vals=()
  for ((r = 1; r <= repeats; ++r)); do
    vals+=("$("$TROUPE_BUILD/apps/bench-transfer" --floats "$1" --rounds "$2" \
              | sed -n 's/.*, \([0-9.]*\) MB\/s/\1/p')")
  done
  rows[$1]="${vals[*]}"
done
python3 - "${iperf[*]}" "${rows[10000]}" "${rows[1000000]}" "${rows[25000000]}" <<'PY'
import sys
from statistics import median
tcp = median(float(x) for x in sys.argv[1].split())
print(f"loopback TCP (iperf3, one stream): {tcp:.0f} MB/s")
print(f"{'buffer':>8} {'pull+push MB/s':>15} {'of iperf3':>10}")
for name, vals in zip(["40 KB", "4 MB", "100 MB"], sys.argv[2:]):
    m = median(float(x) for x in vals.split())
    print(f"{name:>8} {m:>15.0f} {m / tcp:>10.2f}")
PY
