#!/usr/bin/env bash
# GPU training-loop benchmark, side by side in one run on the same GPU:
# troupe's GPU backend (bench-gpu-training) and PyTorch (bench/pytorch_gpu.py)
# on the MLP 784-256-128-10 and the CNN at batch 128 and 1024. The sides are
# interleaved over several rounds; the table shows medians, the ratio of
# samples/s, and each side's device time per step in kernels and in copies
# as a share of its step's wall time.
# Usage: scripts/bench-gpu.sh [seconds per measurement, default 2] [rounds, default 3]
# Environment: TROUPE_BUILD (default build/), PYTHON (default python3, the
# interpreter that has PyTorch with CUDA).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TROUPE_BUILD:-$root/build}"
python="${PYTHON:-python3}"
seconds="${1:-2}"
rounds="${2:-3}"
bench="$build/apps/bench-gpu-training"
if [ ! -x "$bench" ]; then
  echo "bench-gpu.sh: $bench is missing: build troupe with CUDA found" >&2
  exit 2
fi
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  echo "round $round of $rounds" >&2
  "$bench" --json --seconds "$seconds" >>"$out"
  "$python" "$root/bench/pytorch_gpu.py" --seconds "$seconds" >>"$out"
done
"$python" - "$out" <<'PY'
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def medians(impl):
    groups = {}
    for r in rows:
        if r["impl"] == impl:
            groups.setdefault((r["model"], r["batch"]), []).append(r)
    out = {}
    for k, g in groups.items():
        # The median of each figure over the rounds that have it (a round
        # whose profiler failed has no split).
        figures = {f for r in g for f in r if isinstance(r[f], (int, float))}
        out[k] = {f: median(r[f] for r in g if f in r) for f in figures}
        out[k]["device"] = g[0]["device"]
    return out
t, p = medians("troupe"), medians("pytorch")
print(f"troupe: {next(iter(t.values()))['device']}")
print(f"PyTorch: {next(iter(p.values()))['device']}")
def split(r):
    if "kernel_ms" not in r:
        return "n/a"
    return (f"{r['step_ms']:.3f} ms: kernels {100 * r['kernel_ms'] / r['step_ms']:.0f}%, "
            f"copies {100 * r['copy_ms'] / r['step_ms']:.0f}%")
print("| model | batch | troupe samples/s | PyTorch samples/s | troupe/PyTorch "
      "| troupe step (profiled) | PyTorch step (profiled) |")
print("|---|---|---|---|---|---|---|")
for key in sorted(t):
    r, q = t[key], p.get(key)
    ratio = r["samples_per_sec"] / q["samples_per_sec"] if q else float("nan")
    print(f"| {key[0]} | {key[1]} | {r['samples_per_sec']:.0f} "
          f"| {q['samples_per_sec'] if q else float('nan'):.0f} | {ratio:.2f}x "
          f"| {split(r)} | {split(q) if q else 'n/a'} |")
PY
