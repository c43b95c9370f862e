// What the CPU and the OS run, asked once, for choosing kernel sets at run
// time: the binary is built for baseline x86-64, and only the files of a
// kernel set are built for their instruction set.
#pragma once

namespace troupe {

/// AVX2 and FMA.
bool cpu_runs_avx2_fma();

/// AVX-512 F, CD, BW, DQ and VL, with the OS saving the zmm registers
/// (libgcc checks XCR0): what OpenBLAS's SkylakeX kernels and troupe's
/// AVX-512 kernels use.
bool cpu_runs_avx512();

/// Troupe's own CPU kernel sets (convolution, pooling, GELU, layer
/// normalization), from slowest to fastest.
enum class cpu_kernels { generic, avx2, avx512 };

/// The set to use, read once: TROUPE_CPU_KERNELS "avx512", "avx2" or
/// "generic" names one; unset or "auto", the fastest this CPU runs. Throws
/// std::runtime_error naming the variable where the value is unknown or
/// the CPU does not run it (the first backend made, at start-up).
cpu_kernels chosen_cpu_kernels();

/// Of one family of kernel sets, the one chosen_cpu_kernels() names, or
/// where that one is not built (null) the next slower one that is. For
/// files built for baseline x86-64 only, as the choice must run anywhere.
template <class Set>
const Set& pick_kernels(const Set* avx512, const Set* avx2,
                        const Set& generic) {
  switch (chosen_cpu_kernels()) {
    case cpu_kernels::avx512:
      if (avx512 != nullptr)
        return *avx512;
      [[fallthrough]];
    case cpu_kernels::avx2:
      if (avx2 != nullptr)
        return *avx2;
      [[fallthrough]];
    case cpu_kernels::generic: break;
  }
  return generic;
}

} // namespace troupe
