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

} // namespace troupe
