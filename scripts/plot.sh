#!/usr/bin/env bash
# Plots test accuracy against time and against steps, one curve per run,
# from the <run>.csv files that troupe-node writes into a metrics folder
# (cluster.metrics_dir or --metrics-dir).
# Usage: scripts/plot.sh METRICS_DIR [OUT.png]   (default METRICS_DIR/accuracy.png)
set -euo pipefail
dir="${1:?usage: scripts/plot.sh METRICS_DIR [OUT.png]}"
out="${2:-$dir/accuracy.png}"
shopt -s nullglob
files=("$dir"/*.csv)
if [ ${#files[@]} -eq 0 ]; then
  echo "plot.sh: no .csv files in $dir" >&2
  exit 2
fi
if ! command -v gnuplot >/dev/null; then
  echo "plot.sh: gnuplot not found (Debian package gnuplot-nox)" >&2
  exit 2
fi
curves() { # $1: the x column
  local sep=""
  for f in "${files[@]}"; do
    local name
    name="$(basename "$f" .csv)"
    printf '%s"%s" using %s:4 with linespoints title "%s"' "$sep" "$f" "$1" \
      "${name//_/\\_}"
    sep=", "
  done
}
gnuplot <<GP
set terminal pngcairo size 1200,500 font "sans,10"
set output "$out"
set datafile separator ","
set key bottom right
set grid
set multiplot layout 1,2
set xlabel "seconds"
set ylabel "test accuracy"
plot $(curves 1)
set xlabel "step (batches, all workers)"
plot $(curves 2)
unset multiplot
GP
echo "plot: $out"
