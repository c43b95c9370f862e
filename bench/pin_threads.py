"""Imported before torch by the PyTorch benchmarks that take --threads N:
OpenMP and OpenBLAS read their thread counts from the environment once,
when torch loads, and torch.set_num_threads alone left a second core
busy. Sets them from --threads (default 1)."""
import os
import sys


def threads_from_argv():
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
    return "1"


for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = threads_from_argv()
