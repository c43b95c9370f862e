// Flush-to-zero (FTZ) and denormals-are-zero (DAZ) for the extent of one
// update loop, the way TensorFlow runs its CPU kernels
// (port::ScopedFlushDenormal).
//
// Why: an optimizer slot whose gradient turns zero decays geometrically
// (Adam's m by beta1 = 0.9 a step) into the denormal range and, rounded to
// nearest, then stays there for ever: 0.9 * 4 * 2^-149 rounds back to
// 4 * 2^-149. Blank input pixels and dead ReLU units give such
// gradients; after 3 epochs of the Fashion-MNIST MLP 3.4% of the first
// layer's m are denormal. Arithmetic on denormals takes a slow path in
// the CPU: with 30% of the gradient zero, the shard's Adam update at 58786
// floats took 45 us instead of 26 on a 2-core AMD Zen 3 (bench-shard
// --zero-gradients 0.3 [--keep-denormals]). Flushed, such a value becomes
// 0, which is less than 1e-38 away.
//
// The previous control word comes back on scope exit, so nothing else that
// runs on the thread (an actor, the BLAS) sees the mode.
#pragma once

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace troupe {

class scoped_flush_denormals {
public:
  explicit scoped_flush_denormals(bool enable) {
#if defined(__SSE2__)
    if (enable) {
      saved_ = _mm_getcsr();
      _mm_setcsr(saved_ | ftz_daz);
      restore_ = true;
    }
#else
    (void)enable;
#endif
  }

  ~scoped_flush_denormals() {
#if defined(__SSE2__)
    if (restore_)
      _mm_setcsr(saved_);
#endif
  }

  scoped_flush_denormals(const scoped_flush_denormals&) = delete;
  scoped_flush_denormals& operator=(const scoped_flush_denormals&) = delete;

private:
#if defined(__SSE2__)
  static constexpr unsigned ftz_daz = 0x8040; // MXCSR bits 15 (FTZ), 6 (DAZ)
  unsigned saved_ = 0;
  bool restore_ = false;
#endif
};

} // namespace troupe
