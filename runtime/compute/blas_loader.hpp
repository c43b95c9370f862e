// OpenBLAS, opened at run time so that troupe can pick its kernels first.
//
// Why not link it: Debian's OpenBLAS is a DYNAMIC_ARCH build that chooses its
// kernels once, in a library constructor, from the CPU model it knows and the
// OPENBLAS_CORETYPE variable. Release 0.3.21 does not know AMD Zen 4, so on
// these AVX-512 machines it falls back to its Haswell (AVX2) kernels, about
// 1.7x slower than its SkylakeX (AVX-512) ones. A constructor runs before
// main(), too early for us to set that variable; dlopen() after setting it is
// the one reliable order.
#pragma once

#include <string>

namespace troupe::blas {

using sgemm_fn = void (*)(int order, int trans_a, int trans_b, int m, int n,
                          int k, float alpha, const float* a, int lda,
                          const float* b, int ldb, float beta, float* c,
                          int ldc);

/// The loaded library: entry points and what it chose.
struct library {
  sgemm_fn sgemm = nullptr;
  void (*set_num_threads)(int) = nullptr;
  int (*get_num_threads)() = nullptr;
  std::string core;   ///< OpenBLAS's kernel family, e.g. "SkylakeX"
  std::string choice; ///< why: "auto: AVX-512 usable", "OPENBLAS_CORETYPE", ...
};

/// Loads OpenBLAS on first use (thread-safe) and returns it. Kernel policy,
/// from TROUPE_BLAS_KERNELS, read once:
///  - unset or "auto": "SkylakeX" when the CPU and the OS support AVX-512
///    F/CD/BW/DQ/VL (the instructions those kernels use), even when the
///    environment holds another OPENBLAS_CORETYPE (some images pin
///    "Haswell"); otherwise whatever OPENBLAS_CORETYPE or OpenBLAS picks;
///  - "default": whatever OPENBLAS_CORETYPE or OpenBLAS's own detection
///    picks, untouched;
///  - any other value: passed to OpenBLAS as OPENBLAS_CORETYPE.
/// OpenBLAS runs one thread per call (no pool of its own is started):
/// callers that want threads split the work themselves. The process
/// environment is restored after loading, so child processes see what this
/// one inherited. Throws std::runtime_error when the library or a symbol is
/// missing: the process cannot compute without it.
const library& get();

} // namespace troupe::blas
