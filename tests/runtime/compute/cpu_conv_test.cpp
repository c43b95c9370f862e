// The CPU backend's direct convolution (both kernel sets, one and several
// threads) against im2col + gemm on the same backend, for the forward pass
// and all three gradients, on shapes with tails in every dimension.
#include "runtime/compute/cpu_conv.hpp"

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "numeric_check.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/compute/thread_pool.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

using shape = compute_backend::conv_shape;

struct conv_result {
  std::vector<float> y, dw, db, dx;
};

/// The reference: im2col, gemm, bias and activation; and the adjoints.
conv_result through_im2col(const shape& s, int out_c, activation act,
                           const std::vector<float>& x,
                           const std::vector<float>& w,
                           const std::vector<float>& bias,
                           const std::vector<float>& dy) {
  auto be = make_cpu_backend(1, false);
  const int rows = s.batch * s.out_height() * s.out_width();
  std::vector<float> cols(static_cast<size_t>(rows) * s.patch());
  conv_result r;
  r.y.resize(static_cast<size_t>(rows) * out_c);
  be->im2col(x.data(), s, cols.data());
  be->gemm(false, false, rows, out_c, s.patch(), 1.f, cols.data(), s.patch(),
           w.data(), out_c, 0.f, r.y.data(), out_c);
  be->bias_activation_forward(act, r.y.data(), bias.data(), rows, out_c);
  r.dw.resize(w.size());
  r.db.resize(static_cast<size_t>(out_c));
  be->gemm(true, false, s.patch(), out_c, rows, 1.f, cols.data(), s.patch(),
           dy.data(), out_c, 0.f, r.dw.data(), out_c);
  be->bias_backward(dy.data(), r.db.data(), rows, out_c);
  be->gemm(false, true, rows, s.patch(), out_c, 1.f, dy.data(), out_c, w.data(),
           out_c, 0.f, cols.data(), s.patch());
  r.dx.resize(x.size());
  be->col2im(cols.data(), s, r.dx.data());
  return r;
}

conv_result direct(const conv::kernels& k, int threads, const shape& s,
                   int out_c, activation act, const std::vector<float>& x,
                   const std::vector<float>& w, const std::vector<float>& bias,
                   const std::vector<float>& dy) {
  thread_pool pool{threads};
  // Poisoned workspace and outputs: every value read must be written first.
  std::vector<float> ws(cpu_conv::workspace_floats(s, out_c, threads), 1e30f);
  conv_result r;
  r.y.assign(dy.size(), 7.f);
  r.dw.assign(w.size(), 7.f);
  r.db.assign(static_cast<size_t>(out_c), 7.f);
  r.dx.assign(x.size(), 7.f);
  cpu_conv::forward(k, pool, x.data(), s, w.data(), out_c, bias.data(), act,
                    r.y.data(), ws.data());
  cpu_conv::backward(k, pool, s, w.data(), out_c, dy.data(), r.dw.data(),
                     r.db.data(), r.dx.data(), ws.data());
  return r;
}

std::vector<const conv::kernels*> kernel_sets() {
  std::vector<const conv::kernels*> sets{&conv::generic_kernels()};
  if (conv::avx2_kernels() != nullptr)
    sets.push_back(conv::avx2_kernels());
  else
    BOOST_TEST_MESSAGE("no AVX2+FMA on this CPU: not testing those kernels");
  if (conv::avx512_kernels() != nullptr)
    sets.push_back(conv::avx512_kernels());
  else
    BOOST_TEST_MESSAGE("no AVX-512 on this CPU: not testing those kernels");
  return sets;
}

void check_shape(const shape& s, int out_c, activation act) {
  const size_t rows = static_cast<size_t>(s.batch) * s.out_height()
                      * s.out_width();
  auto x = random_vector(
    static_cast<size_t>(s.batch) * s.height * s.width * s.channels, 1);
  auto w = random_vector(static_cast<size_t>(s.patch()) * out_c, 2);
  auto bias = random_vector(static_cast<size_t>(out_c), 3);
  auto dy = random_vector(rows * out_c, 4);
  auto want = through_im2col(s, out_c, act, x, w, bias, dy);
  for (auto* k : kernel_sets())
    for (int threads : {1, 3}) {
      std::string label = std::string{k->isa} + ", " + std::to_string(threads)
                          + " threads, " + std::to_string(s.height) + "x"
                          + std::to_string(s.width) + "x"
                          + std::to_string(s.channels) + " k"
                          + std::to_string(s.kernel) + " pad "
                          + std::to_string(s.pad) + " -> "
                          + std::to_string(out_c) + " " + to_string(act);
      auto got = direct(*k, threads, s, out_c, act, x, w, bias, dy);
      // Sums of up to 1600 products of values below 1, added in another
      // order (and fused) than sgemm adds them: rounding differs by up to
      // ~1e-5 of the sum; a wrong index is off by the size of a term.
      check_close(got.y, want.y, 1e-4f, label + ": y");
      check_close(got.dw, want.dw, 1e-4f, label + ": dw");
      check_close(got.db, want.db, 1e-4f, label + ": db");
      check_close(got.dx, want.dx, 1e-4f, label + ": dx");
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(cpu_conv)

BOOST_AUTO_TEST_CASE(matches_im2col_on_the_cnn_shapes_at_a_small_batch) {
  check_shape({3, 28, 28, 1, 5, 1, 2}, 32, activation::relu);
  check_shape({3, 14, 14, 32, 5, 1, 2}, 64, activation::relu);
}

BOOST_AUTO_TEST_CASE(matches_im2col_with_tails_in_every_dimension) {
  // Output channels not a multiple of 16, rows not a multiple of 6,
  // channels odd, padding other than "same", a 1x1 kernel.
  check_shape({2, 7, 5, 3, 3, 1, 1}, 20, activation::identity);
  check_shape({1, 6, 9, 19, 3, 1, 0}, 33, activation::sigmoid);
  check_shape({4, 5, 5, 2, 5, 1, 1}, 7, activation::tanh);
  check_shape({2, 4, 3, 5, 1, 1, 0}, 16, activation::relu);
  check_shape({5, 1, 1, 4, 3, 1, 1}, 3, activation::relu);
}

BOOST_AUTO_TEST_CASE(a_batch_smaller_than_the_threads_leaves_no_stale_sums) {
  check_shape({1, 6, 6, 4, 3, 1, 1}, 17, activation::relu);
}

BOOST_AUTO_TEST_CASE(the_backend_convolves_directly_at_stride_one_only) {
  auto direct_be = make_cpu_backend(2);
  auto im2col_be = make_cpu_backend(2, false);
  shape same{4, 28, 28, 1, 5, 1, 2}, strided{4, 28, 28, 1, 5, 2, 2};
  BOOST_TEST(direct_be->conv_workspace(same, 32) > 0u);
  BOOST_TEST(direct_be->conv_workspace(strided, 32) == 0u);
  BOOST_TEST(im2col_be->conv_workspace(same, 32) == 0u);
  BOOST_TEST(direct_be->describe().find("direct conv") != std::string::npos);
  BOOST_TEST(im2col_be->describe().find("im2col conv") != std::string::npos);
  // The direct workspace is a fraction of the im2col matrix it replaces.
  shape conv2{64, 14, 14, 32, 5, 1, 2};
  size_t im2col_bytes = size_t{64} * 14 * 14 * conv2.patch() * sizeof(float);
  BOOST_TEST(direct_be->conv_workspace(conv2, 64) < im2col_bytes / 2);
}

BOOST_AUTO_TEST_SUITE_END()
