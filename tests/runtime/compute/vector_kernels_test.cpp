// Every kernel set of vector_kernels.hpp this CPU runs (the baseline one,
// AVX2+FMA, AVX-512) against plain references in double: GELU and its
// gradient against libm's erf and exp over the whole float range that
// matters, layer normalization on rows shorter and longer than a vector
// with tails, max-pooling with ties and strides other than the window.
#include "runtime/compute/vector_kernels.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "numeric_check.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

std::vector<const vec::kernels*> kernel_sets() {
  std::vector<const vec::kernels*> sets{&vec::generic_kernels()};
  for (auto* k : {vec::avx2_kernels(), vec::avx512_kernels()})
    if (k != nullptr)
      sets.push_back(k);
  BOOST_TEST_MESSAGE(sets.size() << " kernel sets run here; chosen: "
                                 << vec::chosen_kernels().isa);
  return sets;
}

double phi_cdf(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
}

double phi_pdf(double x) {
  return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

} // namespace

BOOST_AUTO_TEST_SUITE(vector_kernels)

BOOST_AUTO_TEST_CASE(gelu_and_its_gradient_match_libm) {
  // -12 to 12 in 1/64ths (every lane and a tail), and the far ends, where
  // the exponential underflows.
  std::vector<float> x;
  for (int i = -768; i <= 768; ++i)
    x.push_back(static_cast<float>(i) / 64);
  for (float v :
       {-1e20f, -1e4f, -300.f, -20.f, -1e-30f, 0.f, 1e-30f, 20.f, 1e4f, 1e20f})
    x.push_back(v);
  auto dy = random_vector(x.size(), 7, 0.5f, 2.f);
  std::vector<float> y_want(x.size()), dx_want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y_want[i] = static_cast<float>(x[i] * phi_cdf(x[i]));
    dx_want[i] = static_cast<float>(dy[i]
                                    * (phi_cdf(x[i]) + x[i] * phi_pdf(x[i])));
  }
  for (auto* k : kernel_sets()) {
    std::vector<float> y(x.size(), 7.f), dx(x.size(), 7.f);
    k->gelu(x.data(), y.data(), x.size());
    k->gelu_grad(x.data(), dy.data(), dx.data(), x.size());
    // erf's polynomial is within 1.5e-7 of erf, times |x| in GELU.
    check_close(y, y_want, 2e-6f, std::string{k->isa} + ": gelu");
    check_close(dx, dx_want, 2e-6f, std::string{k->isa} + ": gelu_grad");
    // In place, as the activation layer may call it.
    std::vector<float> in_place = dy;
    k->gelu_grad(x.data(), in_place.data(), in_place.data(), x.size());
    check_close(in_place, dx, 0.f, std::string{k->isa} + ": in place");
  }
}

BOOST_AUTO_TEST_CASE(layer_normalization_rows_match_a_reference_in_double) {
  const float eps = 1e-5f;
  for (size_t c : {1u, 7u, 8u, 16u, 37u, 256u}) {
    // Values far from 0: the mean is large against the spread.
    auto x = random_vector(c, c, 99.f, 101.f);
    auto gamma = random_vector(c, c + 1, 0.5f, 1.5f);
    auto beta = random_vector(c, c + 2);
    auto dy = random_vector(c, c + 3);
    double mean = 0, var = 0;
    for (float v : x)
      mean += v;
    mean /= c;
    for (float v : x)
      var += (v - mean) * (v - mean);
    var /= c;
    const double inv = 1 / std::sqrt(var + eps);
    std::vector<float> n_want(c), y_want(c), dx_want(c), dgamma_want(c),
      dbeta_want(c);
    double mean_g = 0, mean_gn = 0;
    for (size_t i = 0; i < c; ++i) {
      n_want[i] = static_cast<float>((x[i] - mean) * inv);
      y_want[i] = static_cast<float>(n_want[i] * gamma[i] + beta[i]);
      dgamma_want[i] = 1 + dy[i] * n_want[i]; // onto a sum of 1
      dbeta_want[i] = 1 + dy[i];
      mean_g += double{dy[i]} * gamma[i] / c;
      mean_gn += double{dy[i]} * gamma[i] * n_want[i] / c;
    }
    for (size_t i = 0; i < c; ++i)
      dx_want[i] = static_cast<float>(
        inv * (double{dy[i]} * gamma[i] - mean_g - n_want[i] * mean_gn));
    for (auto* k : kernel_sets()) {
      const std::string label = std::string{k->isa} + ", " + std::to_string(c)
                                + " channels: ";
      std::vector<float> normalized(c, 7.f), y(c, 7.f), dx(c, 7.f);
      std::vector<float> dgamma(c, 1.f), dbeta(c, 1.f);
      const float got_inv = k->layernorm_row(x.data(), gamma.data(),
                                             beta.data(), eps, c,
                                             normalized.data(), y.data());
      BOOST_TEST(std::fabs(got_inv - inv) <= 1e-5 * inv, label << got_inv);
      // A mean near 100 leaves float's 1e-5 of the spread in x - mean.
      check_close(normalized, n_want, 1e-4f, label + "normalized");
      check_close(y, y_want, 1e-4f, label + "y");
      k->layernorm_grad_row(normalized.data(), dy.data(), gamma.data(), got_inv,
                            c, dgamma.data(), dbeta.data(), dx.data());
      check_close(dgamma, dgamma_want, 1e-4f, label + "dgamma");
      check_close(dbeta, dbeta_want, 1e-6f, label + "dbeta");
      if (c > 1) // one channel normalises to 0 whatever comes in
        check_close(dx, dx_want, 1e-3f, label + "dx");
      // Without dx (the first layer), the parameter gradients still add.
      k->layernorm_grad_row(normalized.data(), dy.data(), gamma.data(), got_inv,
                            c, dgamma.data(), dbeta.data(), nullptr);
      BOOST_TEST(std::fabs(dbeta[0] - (1 + 2 * dy[0])) <= 1e-6f, label);
    }
  }
}

BOOST_AUTO_TEST_CASE(max_pooling_keeps_the_first_of_equals_and_its_index) {
  struct pool {
    int batch, h, w, c, size, stride;
  };
  for (pool p : {pool{2, 6, 6, 35, 2, 2}, pool{1, 7, 5, 3, 3, 2},
                 pool{3, 4, 4, 16, 2, 1}, pool{1, 1, 1, 20, 1, 1}}) {
    const size_t n = static_cast<size_t>(p.batch) * p.h * p.w * p.c;
    auto x = random_vector(n, n);
    for (size_t i = 0; i < n; i += 3) // ties: every third value rounded
      x[i] = std::round(x[i]);
    const int oh = (p.h - p.size) / p.stride + 1;
    const int ow = (p.w - p.size) / p.stride + 1;
    const size_t outs = static_cast<size_t>(p.batch) * oh * ow * p.c;
    std::vector<float> y_want(outs);
    std::vector<int32_t> at_want(outs);
    for (int b = 0; b < p.batch; ++b)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox)
          for (int ch = 0; ch < p.c; ++ch) {
            const size_t o =
              ((static_cast<size_t>(b) * oh + oy) * ow + ox) * p.c + ch;
            int32_t best = -1;
            for (int ky = 0; ky < p.size; ++ky)
              for (int kx = 0; kx < p.size; ++kx) {
                const auto i = static_cast<int32_t>(
                  ((static_cast<size_t>(b) * p.h + oy * p.stride + ky) * p.w
                   + ox * p.stride + kx)
                    * p.c
                  + ch);
                if (best < 0 || x[i] > x[best])
                  best = i;
              }
            y_want[o] = x[best];
            at_want[o] = best;
          }
    for (auto* k : kernel_sets()) {
      std::vector<float> y(outs, 7.f);
      std::vector<int32_t> at(outs, -7);
      // In two calls, as the backend splits a batch over its threads.
      const int half = p.batch / 2;
      k->maxpool(x.data(), 0, half, p.h, p.w, p.c, p.size, p.stride, y.data(),
                 at.data());
      k->maxpool(x.data(), half, p.batch, p.h, p.w, p.c, p.size, p.stride,
                 y.data(), at.data());
      const std::string label = std::string{k->isa} + ", " + std::to_string(p.c)
                                + " channels";
      check_close(y, y_want, 0.f, label);
      BOOST_TEST(at == at_want, label);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
