// The loops of vector_kernels.hpp, written once and built into each
// instruction set's file (vector_kernels*.cpp), which each makes its set
// with make_set(). Everything here has internal linkage: each file keeps
// its own copy, built for its instruction set, and the linker never
// trades one for another.
//
// The loops are plain C++ that GCC vectorises at -O3 (-fopt-info-vec
// confirms): __restrict where outputs could alias inputs, selects instead
// of branches, and sums kept in eight partial accumulators, since without
// -ffast-math GCC does not reorder a single running sum. GELU's erf and exp
// are polynomials (the libm calls do not vectorise): erf by Abramowitz and
// Stegun 7.1.26 (absolute error below 1.5e-7), exp by Cody-Waite range
// reduction and a degree-6 polynomial (relative error about 2e-7).
#pragma once

#include <cstring>

#include "runtime/compute/vector_kernels.hpp"

namespace troupe::vec {
namespace {

/// e^v for v negative or -0 (never +0); below -87 (and for -inf or NaN)
/// e^-87, near float's least normal, instead of 0.
inline float exp_nonpositive(float v) {
  // The clamp compares bits: GCC does not if-convert a float clamp without
  // -ffinite-math-only, and leaves the loop scalar. Negative floats'
  // bits, read as int32, grow with their magnitude (-inf and NaN above
  // all), so the clamp is an integer minimum.
  int32_t v_bits;
  std::memcpy(&v_bits, &v, sizeof v_bits);
  constexpr int32_t floor_bits = static_cast<int32_t>(0xc2ae0000u); // -87
  v_bits = v_bits > floor_bits ? floor_bits : v_bits;
  std::memcpy(&v, &v_bits, sizeof v);
  constexpr float log2e = 1.44269504088896341f;
  constexpr float round_magic = 12582912.f; // 1.5 * 2^23: adds round
  const float shifted = v * log2e + round_magic;
  const float n = shifted - round_magic;
  // r = v - n ln2, in two parts so r keeps its low bits.
  float r = v - n * 0.693145751953125f;
  r = r - n * 1.428606765330187e-06f;
  float p = 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  int32_t shifted_bits, n_int;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  constexpr int32_t magic_bits = 0x4b400000; // the bits of round_magic
  n_int = shifted_bits - magic_bits;
  const int32_t scale_bits = (n_int + 127) << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

/// Phi(x) and phi(x) of the standard normal, from erf(|x| / sqrt 2) =
/// 1 - poly(t) e^(-x^2 / 2), t = 1 / (1 + p |x| / sqrt 2).
inline void normal_cdf_pdf(float x, float& cdf, float& pdf) {
  constexpr float inv_sqrt2 = 0.70710678118654752f;
  constexpr float inv_sqrt_2pi = 0.39894228040143268f;
  const float u = __builtin_fabsf(x) * inv_sqrt2;
  const float t = 1.f / (1.f + 0.3275911f * u);
  float poly = 1.061405429f;
  poly = poly * t - 1.453152027f;
  poly = poly * t + 1.421413741f;
  poly = poly * t - 0.284496736f;
  poly = poly * t + 0.254829592f;
  poly = poly * t;
  const float e = exp_nonpositive(-0.5f * x * x);
  const float erf_abs = 1.f - poly * e;
  const float erf = __builtin_copysignf(erf_abs, x);
  cdf = 0.5f * (1.f + erf);
  pdf = inv_sqrt_2pi * e;
}

void gelu(const float* __restrict x, float* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float cdf, pdf;
    normal_cdf_pdf(x[i], cdf, pdf);
    y[i] = x[i] * cdf;
  }
}

void gelu_grad(const float* __restrict x, const float* dy, float* dx,
               size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float cdf, pdf;
    normal_cdf_pdf(x[i], cdf, pdf);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

/// best = max(best, xi) per channel; where = in + ch where xi won. The
/// index is chosen by a mask: a select on `greater` for both stores stays
/// a branch per channel ("control flow in loop").
void keep_greater(const float* __restrict xi, float* __restrict best,
                  int32_t* __restrict where, int32_t in, int c) {
  for (int ch = 0; ch < c; ++ch) {
    const float v = xi[ch], b = best[ch];
    const int32_t mask = -static_cast<int32_t>(v > b);
    best[ch] = v > b ? v : b;
    where[ch] = (where[ch] & ~mask) | ((in + ch) & mask);
  }
}

void maxpool(const float* x, int b0, int b1, int h, int w, int c, int size,
             int stride, float* y, int32_t* argmax) {
  const int oh = (h - size) / stride + 1, ow = (w - size) / stride + 1;
  for (int b = b0; b < b1; ++b)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const size_t out = ((static_cast<size_t>(b) * oh + oy) * ow + ox) * c;
        float* best = y + out;
        int32_t* where = argmax + out;
        // The window's first pixel starts the maximum; the others replace
        // it where greater.
        for (int ky = 0; ky < size; ++ky)
          for (int kx = 0; kx < size; ++kx) {
            const auto in = static_cast<int32_t>(
              ((static_cast<size_t>(b) * h + oy * stride + ky) * w + ox * stride
               + kx)
              * c);
            const float* xi = x + in;
            if (ky == 0 && kx == 0) {
              for (int ch = 0; ch < c; ++ch) {
                best[ch] = xi[ch];
                where[ch] = in + ch;
              }
              continue;
            }
            keep_greater(xi, best, where, in, c);
          }
      }
}

constexpr int lanes = 8; ///< partial sums per reduction

/// sum of f(i) over i < c, in eight running sums of double.
template <class F>
double sum_of(size_t c, F&& f) {
  double part[lanes] = {};
  size_t i = 0;
  for (; i + lanes <= c; i += lanes)
    for (int k = 0; k < lanes; ++k)
      part[k] += f(i + k);
  double total = 0;
  for (; i < c; ++i)
    total += f(i);
  for (double p : part)
    total += p;
  return total;
}

float layernorm_row(const float* __restrict x, const float* __restrict gamma,
                    const float* __restrict beta, float eps, size_t c,
                    float* __restrict normalized, float* __restrict y) {
  const double n = static_cast<double>(c);
  const double mean = sum_of(c, [x](size_t i) { return double{x[i]}; }) / n;
  const double var = sum_of(c,
                            [x, mean](size_t i) {
                              const double d = x[i] - mean;
                              return d * d;
                            })
                     / n;
  const auto inv = static_cast<float>(1.0 / __builtin_sqrt(var + eps));
  const auto mean_f = static_cast<float>(mean);
  for (size_t i = 0; i < c; ++i) {
    normalized[i] = (x[i] - mean_f) * inv;
    y[i] = normalized[i] * gamma[i] + beta[i];
  }
  return inv;
}

void layernorm_grad_row(const float* __restrict normalized,
                        const float* __restrict dy,
                        const float* __restrict gamma, float inv_std, size_t c,
                        float* __restrict dgamma, float* __restrict dbeta,
                        float* __restrict dx) {
  for (size_t i = 0; i < c; ++i) {
    dgamma[i] += dy[i] * normalized[i];
    dbeta[i] += dy[i];
  }
  if (dx == nullptr)
    return;
  const double n = static_cast<double>(c);
  const auto mean_g = static_cast<float>(
    sum_of(c, [&](size_t i) { return double{dy[i] * gamma[i]}; }) / n);
  const auto mean_gn = static_cast<float>(
    sum_of(c,
           [&](size_t i) { return double{dy[i] * gamma[i] * normalized[i]}; })
    / n);
  for (size_t i = 0; i < c; ++i)
    dx[i] = inv_std * (dy[i] * gamma[i] - mean_g - normalized[i] * mean_gn);
}

kernels make_set(const char* isa) {
  return kernels{isa,        &maxpool,       &gelu,
                 &gelu_grad, &layernorm_row, &layernorm_grad_row};
}

} // namespace
} // namespace troupe::vec
