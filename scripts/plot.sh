#!/usr/bin/env bash
# Plots each run of a metrics folder (cluster.metrics_dir or --metrics-dir)
# against time: test accuracy (a regression's r2) on the left; training
# loss (solid) and test loss (dashed) on the right; one colour per run,
# named in the legend by its name, run id, time, mode, workers and data
# partition (the "# run=..." line troupe writes first in each file). The
# title names the run when there is one.
# Usage: scripts/plot.sh METRICS_DIR [OUT.png]   (default METRICS_DIR/metrics.png)
set -euo pipefail
dir="${1:?usage: scripts/plot.sh METRICS_DIR [OUT.png]}"
out="${2:-$dir/metrics.png}"
shopt -s nullglob
files=()
for f in "$dir"/*.csv; do
  [[ "$f" == *.progress.csv ]] || files+=("$f")
done
if [ ${#files[@]} -eq 0 ]; then
  echo "plot.sh: no evaluation .csv files in $dir" >&2
  exit 2
fi
if ! command -v gnuplot >/dev/null; then
  echo "plot.sh: gnuplot not found (Debian package gnuplot-nox)" >&2
  exit 2
fi
# "name run-id date (mode, N workers, partition)" from a file's "# run=..."
# line and its time, so two runs of one config tell apart; the file's name
# for files without one.
label_of() {
  local first
  first="$(head -1 "$1")"
  if [[ "$first" == "# run="* ]]; then
    local name id mode workers part when
    name="$(sed -E 's/.*run=([^ ]*).*/\1/' <<<"$first")"
    id="$(sed -E 's/.* run_id=([^ ]{0,8}).*/\1/' <<<"$first")"
    mode="$(sed -E 's/.* mode=([^ ]*).*/\1/' <<<"$first")"
    workers="$(sed -E 's/.* workers=([^ ]*).*/\1/' <<<"$first")"
    part="$(sed -E 's/.* data_partition=([^ ]*).*/\1/' <<<"$first")"
    when="$(date -r "$1" '+%Y-%m-%d %H:%M')"
    local plural="s"
    [ "$workers" = 1 ] && plural=""
    echo "$name $id $when ($mode, $workers worker$plural, $part)"
  else
    basename "$1" .csv
  fi
}
# "test accuracy", "test r2" for a regression's files, or both.
score="$(for f in "${files[@]}"; do grep -m1 '^seconds,' "$f" | cut -d, -f4
         done | sort -u | tr _ ' ' | paste -sd/ | sed 's|/| / |g')"
escape() { local s="${1//_/\\_}"; echo "${s//\"/\\\"}"; }
accuracy="" loss="" sep=""
i=0
for f in "${files[@]}"; do
  i=$((i + 1))
  label="$(escape "$(label_of "$f")")"
  accuracy+="$sep\"$f\" using 1:4 with linespoints lc $i title \"$label\""
  progress="${f%.csv}.progress.csv"
  if [ -f "$progress" ]; then
    loss+="$sep\"$progress\" using 1:4 with lines lc $i title \"$label: training\", "
  else
    loss+="$sep"
  fi
  loss+="\"$f\" using 1:5 with linespoints dt 2 lc $i title \"$label: test\""
  sep=", "
done
if [ ${#files[@]} -eq 1 ]; then
  title="$(escape "$(label_of "${files[0]}")")"
else
  title="$(escape "$dir"): ${#files[@]} runs"
fi
gnuplot <<GP
set terminal pngcairo size 1400,550 font "sans,10"
set output "$out"
set datafile separator ","
set grid
set multiplot layout 1,2 title "$title"
set key bottom right
set xlabel "seconds"
set ylabel "${score:-test accuracy}"
plot $accuracy
set key top right
set ylabel "loss"
plot $loss
unset multiplot
GP
echo "plot: $out"
