#!/usr/bin/env bash
# Pull+push round trips of 40 KB, 4 MB and 100 MB float buffers between two
# processes on 127.0.0.1, side by side in one run: troupe through its data
# plane (bench-transfer, what workers on other nodes use: through shared
# memory, as on one host, and over TCP, as between hosts), troupe through
# CAF's own connection (--via basp), ps-lite's push+pull (1 server, 1
# worker, scripts/bench-pslite.sh; built beside the project from a ps-lite
# checkout, see scripts/build-pslite.sh), each with and without transparent
# huge pages for malloc on every side (GLIBC_TUNABLES=glibc.malloc.hugetlb=1),
# and iperf3's loopback bandwidth. Runs alternate; medians over REPEATS.
# Prints ms per round trip, ps-lite's time over troupe's (above 1: troupe
# ahead) and troupe's MB/s as a share of iperf3's. Then the cluster key's
# cost, in the same runs: troupe with links that proved the key (--key, a
# default cluster's links) against links that proved nothing, on the data
# plane and through BASP, and the first BASP connect of each (TCP, the
# proof, CAF's handshake). With TROUPE_BEFORE=PATH (a bench-transfer built
# from an earlier commit, before the front door) its plaintext runs join
# the same rotation as "before".
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
keydir="$(mktemp -d)"
trap 'rm -rf "$results" "$keydir"' EXIT
key=(--key "$keydir/cluster.key")
before="${TROUPE_BEFORE:-}"
ms_of() { sed -n 's/.*: \([0-9.]*\) ms per pull+push.*/\1/p'; }
# One run: "<ms per round> <connect ms>".
run_one() {
  local out
  out="$("$@")"
  echo "$(echo "$out" | ms_of) $(echo "$out" | sed -n 's/^connect: \([0-9.]*\) ms/\1/p')"
}
for ((r = 1; r <= repeats; ++r)); do
  port="$(python3 "$TROUPE_ROOT/scripts/benchlib.py" port)"
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
      echo "troupe $1 $pages $(run_one env "${env_pages[@]}" "$bench" --floats "$1" --rounds "$2")" >>"$results"
      echo "tcp $1 $pages $(run_one env "${env_pages[@]}" "$bench" --floats "$1" --rounds "$2" --via tcp)" >>"$results"
      echo "keyed $1 $pages $(run_one env "${env_pages[@]}" "$bench" --floats "$1" --rounds "$2" "${key[@]}")" >>"$results"
      echo "basp $1 $pages $(run_one env "${env_pages[@]}" "$bench" --floats "$1" --rounds "$2" --via basp)" >>"$results"
      echo "keyedbasp $1 $pages $(run_one env "${env_pages[@]}" "$bench" --floats "$1" --rounds "$2" --via basp "${key[@]}")" >>"$results"
      if [ -n "$before" ]; then
        echo "before $1 $pages $(run_one env "${env_pages[@]}" "$before" --floats "$1" --rounds "$2") -" >>"$results"
        echo "beforebasp $1 $pages $(run_one env "${env_pages[@]}" "$before" --floats "$1" --rounds "$2" --via basp) -" >>"$results"
      fi
      if [ "$pslite_ok" = 1 ]; then
        echo "pslite $1 $pages $(PSLITE_HUGETLB=$([ "$pages" = huge ] && echo 1 || echo 0) \
          "$TROUPE_ROOT/scripts/bench-pslite.sh" "$1" "$2" 2>/dev/null | ms_of)" >>"$results"
      fi
    done
  done
done
python3 - "$results" <<'PY'
import math
import sys
from collections import defaultdict
from statistics import median
vals = defaultdict(list)
connects = defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) >= 4 and parts[0] != "iperf3" and parts[3] != "":
        vals[tuple(parts[:3])].append(float(parts[3]))
        if len(parts) == 5 and parts[4] not in ("", "-"):
            connects[parts[0]].append(float(parts[4]))
    elif len(parts) == 3 and parts[0] == "iperf3":
        vals[("iperf3", "-", "-")].append(float(parts[2]))
tcp = median(vals[("iperf3", "-", "-")])
print(f"loopback TCP (iperf3, one stream): {tcp:.0f} MB/s")
print("troupe: the data plane through shared memory; TCP: the same with shared memory off")
print(f"{'buffer':>7} {'huge pages':>10} {'troupe ms':>10} {'TCP ms':>8} {'via BASP ms':>12} "
      f"{'ps-lite ms':>11} {'ps-lite/troupe':>15} {'ps-lite/TCP':>12} {'troupe MB/s':>12} "
      f"{'of iperf3':>10} {'TCP of iperf3':>14}")
for floats, name in (("10000", "40 KB"), ("1000000", "4 MB"), ("25000000", "100 MB")):
    for pages in ("plain", "huge"):
        t = median(vals[("troupe", floats, pages)])
        c = median(vals[("tcp", floats, pages)])
        b = median(vals[("basp", floats, pages)])
        p = vals.get(("pslite", floats, pages))
        p_ms = f"{median(p):.3f}" if p else "-"
        ratio = f"{median(p) / t:.2f}" if p else "-"
        ratio_tcp = f"{median(p) / c:.2f}" if p else "-"
        mbs = 2 * 4 * int(floats) / (t / 1000) / 1e6
        mbs_tcp = 2 * 4 * int(floats) / (c / 1000) / 1e6
        print(f"{name:>7} {'yes' if pages == 'huge' else 'no':>10} {t:>10.3f} {c:>8.3f} {b:>12.3f} "
              f"{p_ms:>11} {ratio:>15} {ratio_tcp:>12} {mbs:>12.0f} {mbs / tcp:>10.2f} "
              f"{mbs_tcp / tcp:>14.2f}")
print()
print("the cluster key's cost: ms per round trip, links that proved the key")
print("against links that proved nothing (above 1: the key costs)")
has_before = any(k[0] == "before" for k in vals)
head = f"{'buffer':>7} {'huge pages':>10} {'data plain':>11} {'data keyed':>11} {'keyed/plain':>12} {'BASP plain':>11} {'BASP keyed':>11} {'keyed/plain':>12}"
if has_before:
    head += f" {'data before':>12} {'keyed/before':>13} {'BASP before':>12} {'keyed/before':>13}"
print(head)
ratios = defaultdict(list)
for floats, name in (("10000", "40 KB"), ("1000000", "4 MB"), ("25000000", "100 MB")):
    for pages in ("plain", "huge"):
        m = {k: median(vals[(k, floats, pages)]) for k in ("troupe", "keyed", "basp", "keyedbasp")}
        ratios["data keyed/plain"].append(m["keyed"] / m["troupe"])
        ratios["BASP keyed/plain"].append(m["keyedbasp"] / m["basp"])
        if has_before:
            ratios["data keyed/before"].append(m["keyed"] / median(vals[("before", floats, pages)]))
            ratios["BASP keyed/before"].append(m["keyedbasp"] / median(vals[("beforebasp", floats, pages)]))
        row = (f"{name:>7} {'yes' if pages == 'huge' else 'no':>10} {m['troupe']:>11.3f} {m['keyed']:>11.3f} "
               f"{m['keyed'] / m['troupe']:>12.3f} {m['basp']:>11.3f} {m['keyedbasp']:>11.3f} "
               f"{m['keyedbasp'] / m['basp']:>12.3f}")
        if has_before:
            d = median(vals[("before", floats, pages)])
            bb = median(vals[("beforebasp", floats, pages)])
            row += f" {d:>12.3f} {m['keyed'] / d:>13.3f} {bb:>12.3f} {m['keyedbasp'] / bb:>13.3f}"
        print(row)
print("geometric means over the six rows: " + ", ".join(
    f"{k} {math.exp(sum(math.log(r) for r in v) / len(v)):.3f}" for k, v in ratios.items()))
plain_c = connects["troupe"] + connects["basp"]
keyed_c = connects["keyed"] + connects["keyedbasp"]
print(f"first BASP connect (TCP, proof, CAF's handshake), median of {len(plain_c)}: "
      f"no proof {median(plain_c):.2f} ms, the key {median(keyed_c):.2f} ms "
      f"(+{median(keyed_c) - median(plain_c):.2f} ms)")
PY
