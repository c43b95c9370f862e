// The arithmetic of the CUDA kernels (gpu/kernel_math.hpp) run on the host
// against the CPU backend, in every build: the kernels' index and formula
// logic is checked on machines without a GPU. The cuBLAS argument mapping
// is checked the same way, through OpenBLAS's column-major sgemm, which
// has cuBLAS's conventions.
#include "gpu/kernel_math.hpp"

#include <array>
#include <boost/test/unit_test.hpp>
#include <limits>
#include <vector>

#include "runtime/compute/blas_loader.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "numeric_check.hpp"

using namespace troupe;
using namespace troupe::test;
using namespace troupe::gpu;

namespace {

constexpr int col_major = 102, no_trans = 111, trans = 112;

} // namespace

BOOST_AUTO_TEST_SUITE(kernel_math)

BOOST_AUTO_TEST_CASE(the_column_major_gemm_computes_the_row_major_one) {
  auto cpu = make_cpu_backend(1);
  auto& blas = blas::get();
  for (auto [m, n, k] : std::vector<std::array<int, 3>>{
         {1, 1, 1}, {3, 5, 7}, {17, 1, 9}, {33, 65, 129}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
        auto a = random_vector(static_cast<size_t>(ta ? k : m) * lda, 1);
        auto b = random_vector(static_cast<size_t>(tb ? n : k) * ldb, 2);
        auto want = random_vector(static_cast<size_t>(m) * ldc, 3);
        auto got = want;
        cpu->gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f,
                  want.data(), ldc);
        auto g = to_col_major(ta, tb, m, n, k, a.data(), lda, b.data(), ldb);
        blas.sgemm(col_major, g.trans_first ? trans : no_trans,
                   g.trans_second ? trans : no_trans, g.m, g.n, g.k, 0.5f,
                   g.first, g.ld_first, g.second, g.ld_second, 0.25f,
                   got.data(), ldc);
        check_close(got, want, 1e-6f,
                    "gemm ta=" + std::to_string(ta)
                      + " tb=" + std::to_string(tb));
      }
}

BOOST_AUTO_TEST_CASE(activations_and_their_gradients) {
  auto cpu = make_cpu_backend(1);
  for (auto act : {activation::identity, activation::sigmoid, activation::tanh,
                   activation::relu}) {
    auto y = random_vector(999, 4, -6, 6);
    auto got = y;
    cpu->bias_activation_forward(act, y.data(), nullptr, 1, 999);
    for (auto& v : got)
      v = activate(act, v);
    check_close(got, y, 0.f, std::string{"forward "} + to_string(act));
    auto dy = random_vector(999, 5);
    auto dgot = dy;
    cpu->activation_backward(act, y.data(), dy.data(), dy.size());
    for (size_t i = 0; i < dgot.size(); ++i)
      dgot[i] = activation_grad(act, y[i], dgot[i]);
    check_close(dgot, dy, 0.f, std::string{"backward "} + to_string(act));
  }
}

BOOST_AUTO_TEST_CASE(softmax_rows_match_the_cpu_backend) {
  auto cpu = make_cpu_backend(1);
  for (int classes : {1, 10, 17}) {
    const int rows = 50;
    auto z = random_vector(static_cast<size_t>(rows) * classes, 6, -9, 9);
    std::vector<int32_t> labels(rows);
    for (int r = 0; r < rows; ++r)
      labels[r] = (r * 3) % classes;
    std::vector<float> want(z.size()), got(z.size());
    auto total = cpu->softmax_cross_entropy(z.data(), labels.data(), rows,
                                            classes, want.data(), 0.02f);
    double loss_sum = 0;
    int64_t hits = 0;
    for (int r = 0; r < rows; ++r) {
      double loss = 0;
      int32_t hit = 0;
      size_t first = static_cast<size_t>(r) * classes;
      softmax_row(z.data() + first, labels[r], classes, got.data() + first,
                  0.02f, &loss, &hit);
      loss_sum += loss;
      hits += hit;
    }
    BOOST_TEST(loss_sum == total.loss_sum, boost::test_tools::tolerance(1e-12));
    BOOST_TEST(hits == total.correct);
    check_close(got, want, 0.f, "dlogits");
  }
  // A label out of range: NaN, no read outside the row.
  std::vector<float> z{1, 2, 3};
  double loss = 0;
  int32_t hit = 1;
  softmax_row(z.data(), 3, 3, nullptr, 1.f, &loss, &hit);
  BOOST_TEST(std::isnan(loss));
  BOOST_TEST(hit == 0);
}

BOOST_AUTO_TEST_CASE(im2col_and_col2im_elements_every_geometry) {
  auto cpu = make_cpu_backend(1);
  using shape = compute_backend::conv_shape;
  for (shape s : {shape{1, 1, 1, 1, 1, 1, 0}, shape{2, 5, 7, 3, 3, 1, 1},
                  shape{3, 8, 8, 2, 5, 1, 2}, shape{2, 9, 6, 4, 3, 2, 1},
                  shape{2, 6, 6, 1, 2, 2, 0}, shape{2, 14, 14, 32, 5, 1, 2}}) {
    auto g = geometry_of(s);
    size_t n_x = static_cast<size_t>(s.batch) * s.height * s.width * s.channels;
    size_t n_cols = static_cast<size_t>(s.batch) * g.oh * g.ow * g.patch;
    auto x = random_vector(n_x, 7);
    std::vector<float> want(n_cols), got(n_cols);
    cpu->im2col(x.data(), s, want.data());
    for (size_t i = 0; i < n_cols; ++i)
      got[i] = im2col_value(x.data(), g, i);
    std::string label = std::to_string(s.height) + "x" + std::to_string(s.width)
                        + "x" + std::to_string(s.channels) + " k"
                        + std::to_string(s.kernel) + " s"
                        + std::to_string(s.stride) + " p"
                        + std::to_string(s.pad);
    check_close(got, want, 0.f, "im2col " + label);
    auto dcols = random_vector(n_cols, 8);
    std::vector<float> dwant(n_x), dgot(n_x);
    cpu->col2im(dcols.data(), s, dwant.data());
    for (size_t i = 0; i < n_x; ++i)
      dgot[i] = col2im_value(dcols.data(), g, i);
    check_close(dgot, dwant, 0.f, "col2im " + label); // same order of sums
  }
}

BOOST_AUTO_TEST_CASE(maxpool_elements_and_their_argmax) {
  auto cpu = make_cpu_backend(1);
  struct pool {
    int batch, h, w, c, size, stride;
  };
  for (pool p : {pool{1, 2, 2, 1, 2, 2}, pool{3, 28, 28, 32, 2, 2},
                 pool{2, 7, 9, 3, 3, 2}}) {
    pool_geometry g{p.h,
                    p.w,
                    p.c,
                    p.size,
                    p.stride,
                    (p.h - p.size) / p.stride + 1,
                    (p.w - p.size) / p.stride + 1};
    size_t n_x = static_cast<size_t>(p.batch) * p.h * p.w * p.c;
    size_t n_y = static_cast<size_t>(p.batch) * g.oh * g.ow * p.c;
    auto x = random_vector(n_x, 9);
    x[0] = x[1]; // a tie
    std::vector<float> want(n_y), got(n_y);
    std::vector<int32_t> want_at(n_y), got_at(n_y);
    cpu->maxpool_forward(x.data(), p.batch, p.h, p.w, p.c, p.size, p.stride,
                         want.data(), want_at.data());
    for (size_t i = 0; i < n_y; ++i)
      got[i] = maxpool_value(x.data(), g, i, &got_at[i]);
    check_close(got, want, 0.f, "maxpool");
    BOOST_TEST((got_at == want_at));
  }
}

BOOST_AUTO_TEST_SUITE_END()
