#!/usr/bin/env bash
# CPU training-loop benchmark, side by side in one run: troupe's loop and
# OpenBLAS sgemm on the same gemm shapes (bench-cpu-training; for the CNN
# the gemms of im2col + gemm), and PyTorch 1.13 from Debian (python3-torch
# on libopenblas0-openmp; oneDNN for its convolutions) on the same models,
# batches and thread counts: the MLPs (bench/pytorch_mlp.py) and the CNN of
# config/cnn.json (bench/pytorch_cnn.py). Each side runs twice:
#  - with the best kernels the CPU runs (troupe's auto choice of OpenBLAS
#    kernels and of its own convolution; PyTorch on the same OpenBLAS core
#    through OPENBLAS_CORETYPE, oneDNN on its own choice);
#  - with both forced to AVX2, as on a CPU without AVX-512: OpenBLAS's
#    Haswell kernels, TROUPE_CPU_KERNELS=avx2, ONEDNN_MAX_CPU_ISA=AVX2.
# The "kernels" column names the OpenBLAS core of the pass, "conv" troupe's
# convolution kernels. The two vCPUs of a small VM swing by tens of
# percent from run to run, so the sides are interleaved over several
# rounds and the table shows medians.
# Usage: scripts/bench-cpu.sh [seconds per measurement, default 1] [rounds, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# OpenBLAS's OpenMP build, which PyTorch runs on here (troupe_setup
# installs python3-torch).
troupe_install_missing libopenblas0-openmp
troupe_setup
seconds="${1:-1}"
rounds="${2:-3}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
bench="$TROUPE_BUILD/apps/bench-cpu-training"
openmp_blas=/usr/lib/x86_64-linux-gnu/openblas-openmp
# The OpenBLAS core auto picks: ask the bench, which reports it.
# (sed reads all of its input: no SIGPIPE under pipefail.)
core_of() { sed -n '1s/.*"kernels":"\([^"]*\)".*/\1/p'; }
best="$("$bench" --seconds 0.01 --threads 1 --json | core_of)"
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
for ((round = 1; round <= rounds; ++round)); do
  echo "round $round of $rounds" >&2
  "$bench" --json --model all --seconds "$seconds" >>"$out"
  TROUPE_BLAS_KERNELS=Haswell TROUPE_CPU_KERNELS=avx2 \
    "$bench" --json --model all --seconds "$seconds" >>"$out"
  for script in pytorch_mlp.py pytorch_cnn.py; do
    OPENBLAS_CORETYPE="$best" LD_LIBRARY_PATH="$openmp_blas" \
      /usr/bin/python3 "$TROUPE_ROOT/bench/$script" \
      --seconds "$seconds" --kernels "$best" >>"$out"
    ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell \
      LD_LIBRARY_PATH="$openmp_blas" /usr/bin/python3 \
      "$TROUPE_ROOT/bench/$script" --seconds "$seconds" --kernels Haswell \
      >>"$out"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def medians(impl):
    """Per (kernels, model, batch, threads): the median of each figure."""
    groups = {}
    for r in rows:
        if r["impl"] == impl:
            key = (r["kernels"], r["model"], r["batch"], r["threads"])
            groups.setdefault(key, []).append(r)
    return {k: {f: (median(r[f] for r in g) if isinstance(g[0][f], float)
                    else g[0][f]) for f in g[0]} for k, g in groups.items()}
t, p = medians("troupe"), medians("pytorch")
print("| kernels | conv | model | batch | threads | troupe samples/s "
      "| loop GFLOP/s | sgemm GFLOP/s | loop/sgemm | PyTorch samples/s "
      "| troupe/PyTorch |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(t, key=lambda k: (k[0], k[1], k[2], k[3])):
    r, q = t[key], p.get(key)
    ratio = r["samples_per_sec"] / q["samples_per_sec"] if q else float("nan")
    print(f"| {key[0]} | {r['conv']} | {key[1]} | {key[2]} | {key[3]} "
          f"| {r['samples_per_sec']:.0f} | {r['loop_gflops']:.1f} "
          f"| {r['sgemm_gflops']:.1f} "
          f"| {100 * r['loop_gflops'] / r['sgemm_gflops']:.0f}% "
          f"| {q['samples_per_sec'] if q else float('nan'):.0f} | {ratio:.2f}x |")
PY
