# shellcheck shell=bash
# Sourced by the benchmarks whose work is inline Python: the steps they all
# take before it, in one place (scripts/setup.sh installs and builds;
# scripts/benchlib.py holds the inline Python's shared pieces).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

# troupe_bench_setup: troupe_setup, then what the inline Python expects:
# the project's root as the working folder, TROUPE_BUILD in the
# environment and the Python module (TROUPE_BUILD/python) importable.
troupe_bench_setup() {
  troupe_setup || return 1
  cd "$TROUPE_ROOT" || return 1
  export TROUPE_BUILD
  export PYTHONPATH="$TROUPE_BUILD/python:$PYTHONPATH"
}

# troupe_bench_click_logs DIR: the data of scripts/bench-clicks.sh and
# scripts/bench-click-stream.sh, written into DIR once (made if missing):
# 1M training and 100k test click logs from troupe-clicks, 4 numeric and
# 8 categorical fields of 100000 Zipf-1.1 values each, seed 7.
troupe_bench_click_logs() {
  mkdir -p "$1" || return 1
  local dir
  dir="$(cd "$1" && pwd)" || return 1
  if [[ ! -f "$dir/test.tsv" ]]; then
    "$TROUPE_BUILD/apps/troupe-clicks" --out "$dir" --train 1000000 \
      --test 100000 --numeric 4 --categorical 8 --values 100000 --seed 7
  fi
}
