#!/usr/bin/env bash
# ps-lite reference for bench-transfer: one push+pull round trip of N floats
# between a ps-lite worker and server (plus ps-lite's scheduler), three
# processes on 127.0.0.1, through bench/pslite_roundtrip.cc. Prints the
# worker's line, in bench-transfer's format:
#   N floats (K KB): X ms per pull+push, Y MB/s
# With --rows, the reference for bench-rows instead: sparse pulls and
# pushes of embedding rows through bench/pslite_rows.cc, whose options
# (--ids N --dim D --rounds R ...) follow and whose line is bench-rows':
#   N ids x D floats: X ms per pull+push, Y M rows/s pulled+pushed
# Builds ps-lite first (scripts/build-pslite.sh, quick when built) when its
# source is there. Every process is bounded by a timeout and all of them are
# ended on exit, failure or interrupt.
# Usage: scripts/bench-pslite.sh [--hugetlb] [floats, default 1000000]
#        [rounds, default 20] [extra pslite_roundtrip options: --keys K ...]
#        scripts/bench-pslite.sh [--hugetlb] --rows [pslite_rows options]
# Environment:
#   PSLITE_SRC     ps-lite checkout (default ../ps-lite-src next to the repo)
#   PSLITE_BUILD   build folder (default ../ps-lite-build next to the repo)
#   PSLITE_HUGETLB=1   same as --hugetlb: glibc.malloc.hugetlb=1 in
#                  GLIBC_TUNABLES for all three processes (transparent huge
#                  pages for malloc's mmap'd chunks and heap; needs THP
#                  "madvise" or "always")
#   PSLITE_TIMEOUT seconds any process may run (default 300)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${PSLITE_SRC:-$(dirname "$root")/ps-lite-src}"
build="${PSLITE_BUILD:-$(dirname "$root")/ps-lite-build}"
hugetlb="${PSLITE_HUGETLB:-0}"
limit="${PSLITE_TIMEOUT:-300}"
if [ "${1:-}" = "--hugetlb" ]; then
  hugetlb=1
  shift
fi
if [ "${1:-}" = "--rows" ]; then
  shift
  bin="$build/pslite_rows"
  args=("$@")
else
  floats="${1:-1000000}"
  rounds="${2:-20}"
  shift $(($# < 2 ? $# : 2))
  bin="$build/pslite_roundtrip"
  args=(--floats "$floats" --rounds "$rounds" "$@")
fi

if [ -f "$src/include/ps/ps.h" ]; then
  "$root/scripts/build-pslite.sh" "$src" "$build" >/dev/null
elif [ ! -x "$bin" ]; then
  echo "bench-pslite: error: no $bin and no ps-lite source at $src;" \
       "set PSLITE_SRC or run scripts/build-pslite.sh PSLITE_SRC" >&2
  exit 1
fi

if [ "$hugetlb" = 1 ]; then
  export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"
fi
free_port() { python3 "$(dirname "${BASH_SOURCE[0]}")/benchlib.py" port; }
# Loopback only: the scheduler binds DMLC_PS_ROOT_URI, the others
# DMLC_NODE_HOST (without it ps-lite picks the first non-loopback interface).
export DMLC_PS_ROOT_URI=127.0.0.1
export DMLC_PS_ROOT_PORT="$(free_port)"
export DMLC_NODE_HOST=127.0.0.1
export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1
unset DMLC_INTERFACE DMLC_LOCAL DMLC_PS_VAN_TYPE PORT PS_VERBOSE

tmp="$(mktemp -d)"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start() {  # role; the process's pid is appended to pids
  DMLC_ROLE="$1" timeout -k 5 "$limit" "$bin" "${args[@]}" \
    >"$tmp/$1.out" 2>"$tmp/$1.err" &
  pids+=($!)
}
thp() { sed -n 's/^thp_fault_alloc //p' /proc/vmstat 2>/dev/null || echo 0; }
thp0="$(thp)"
start scheduler
start server
start worker
# All three leave ps-lite's closing barrier together after the worker's
# rounds; the first one to fail (or to time out) ends the others.
ok=1
for _ in "${pids[@]}"; do
  if ! wait -n; then ok=0; break; fi
done
if [ "$ok" = 1 ] && grep -q 'per pull+push' "$tmp/worker.out"; then
  cat "$tmp/worker.out"
  [ "$hugetlb" = 1 ] && echo "bench-pslite: hugetlb=1, thp_fault_alloc" \
    "+$(($(thp) - thp0)) (system-wide)" >&2
  exit 0
fi
echo "bench-pslite: error: the run failed (timeout ${limit}s); logs:" >&2
for role in scheduler server worker; do
  echo "--- $role" >&2
  tail -n 20 "$tmp/$role.err" "$tmp/$role.out" >&2 2>/dev/null || true
done
exit 1
