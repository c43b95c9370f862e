// Every CPU backend operation against a plain-loop reference, with edge
// sizes (0, 1, odd).
#include "runtime/compute/cpu_backend.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "numeric_check.hpp"

using namespace troupe;
using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(cpu_backend)

BOOST_AUTO_TEST_CASE(gemm_all_transposes_and_edge_sizes) {
  // 3 threads: the sizes past ~2 MFLOP are split by rows ({130, 70, 120}),
  // by columns (C with few rows: {5, 700, 400}) or not at all.
  for (int threads : {1, 3}) {
    auto be = make_cpu_backend(threads);
    for (auto [m, n, k] : gemm_sizes({{130, 70, 120}, {5, 700, 400}}))
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          auto a = random_vector(static_cast<size_t>(m * k), 1);
          auto b = random_vector(static_cast<size_t>(k * n), 2);
          auto c = random_vector(static_cast<size_t>(m * n), 3);
          auto want = c;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              double s = 0;
              for (int p = 0; p < k; ++p)
                s += double(ta ? a[p * m + i] : a[i * k + p])
                     * double(tb ? b[j * k + p] : b[p * n + j]);
              want[i * n + j] = static_cast<float>(0.5 * s
                                                   + 0.25 * c[i * n + j]);
            }
          be->gemm(ta, tb, m, n, k, 0.5f, a.data(), ta ? m : k, b.data(),
                   tb ? k : n, 0.25f, c.data(), n);
          check_close(c, want, 1e-5f,
                      "gemm " + std::to_string(m) + "x" + std::to_string(n)
                        + "x" + std::to_string(k) + (ta ? " A^T" : "")
                        + (tb ? " B^T" : "") + ", " + std::to_string(threads)
                        + " threads");
        }
  }
}

BOOST_AUTO_TEST_CASE(bias_activation_forward_and_backward) {
  auto be = make_cpu_backend(1);
  const int rows = 3, cols = 5;
  auto x = random_vector(rows * cols, 4, -3, 3);
  auto bias = random_vector(cols, 5);
  for (auto act : {activation::identity, activation::sigmoid, activation::tanh,
                   activation::relu}) {
    auto y = x;
    be->bias_activation_forward(act, y.data(), bias.data(), rows, cols);
    std::vector<float> want(x.size()), dwant(x.size());
    auto dy = random_vector(x.size(), 6);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < cols; ++j) {
        double z = x[r * cols + j] + bias[j], out = z, deriv = 1;
        switch (act) {
          case activation::identity: break;
          case activation::sigmoid:
            out = 1 / (1 + std::exp(-z));
            deriv = out * (1 - out);
            break;
          case activation::tanh:
            out = std::tanh(z);
            deriv = 1 - out * out;
            break;
          case activation::relu:
            out = z > 0 ? z : 0;
            deriv = z > 0 ? 1 : 0;
            break;
        }
        want[r * cols + j] = static_cast<float>(out);
        dwant[r * cols + j] = static_cast<float>(dy[r * cols + j] * deriv);
      }
    check_close(y, want, 1e-6f, to_string(act));
    be->activation_backward(act, y.data(), dy.data(), dy.size());
    check_close(dy, dwant, 1e-5f, std::string{"d "} + to_string(act));
  }
}

BOOST_AUTO_TEST_CASE(bias_backward_sums_columns) {
  auto be = make_cpu_backend(1);
  auto dy = random_vector(4 * 3, 7);
  std::vector<float> db(3, 99.f), want(3, 0.f);
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 3; ++j)
      want[j] += dy[r * 3 + j];
  be->bias_backward(dy.data(), db.data(), 4, 3);
  check_close(db, want, 1e-6f, "bias_backward");
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_loss_hits_and_gradient) {
  auto be = make_cpu_backend(1);
  const int rows = 4, classes = 3;
  std::vector<float> logits{1, 2, 3, 10, 0, 0, -1, -1, 5, 0.5f, 0.5f, 0.5f};
  std::vector<int32_t> labels{2, 0, 1, 1};
  std::vector<float> d(logits.size());
  auto r = be->softmax_cross_entropy(logits.data(), labels.data(), rows,
                                     classes, d.data(), 0.25f);
  double loss = 0;
  std::vector<float> dwant(logits.size());
  int hits = 0;
  for (int i = 0; i < rows; ++i) {
    double s = 0;
    int best = 0;
    for (int j = 0; j < classes; ++j) {
      s += std::exp(double(logits[i * 3 + j]));
      if (logits[i * 3 + j] > logits[i * 3 + best])
        best = j;
    }
    hits += best == labels[i];
    loss += std::log(s) - logits[i * 3 + labels[i]];
    for (int j = 0; j < classes; ++j)
      dwant[i * 3 + j] = static_cast<float>(
        0.25 * (std::exp(double(logits[i * 3 + j])) / s - (j == labels[i])));
  }
  BOOST_TEST(r.loss_sum == loss, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(r.correct == hits);
  check_close(d, dwant, 1e-6f, "dlogits");
  // Large logits must not overflow.
  std::vector<float> big{1000.f, 0.f};
  int32_t label = 1;
  auto rb = be->softmax_cross_entropy(big.data(), &label, 1, 2, nullptr, 0);
  BOOST_TEST(rb.loss_sum == 1000.0, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(im2col_matches_direct_convolution_and_col2im_is_adjoint) {
  auto be = make_cpu_backend(1);
  compute_backend::conv_shape s{2, 5, 4, 3, 3, 1, 1};
  const int oh = s.out_height(), ow = s.out_width(), patch = s.patch();
  BOOST_TEST(oh == 5);
  auto x = random_vector(static_cast<size_t>(2 * 5 * 4 * 3), 8);
  std::vector<float> cols(static_cast<size_t>(2 * oh * ow * patch));
  be->im2col(x.data(), s, cols.data());
  // Reference: element (row=(b,oy,ox), col=(ky,kx,c)).
  for (int b = 0; b < 2; ++b)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx)
            for (int c = 0; c < 3; ++c) {
              int iy = oy - 1 + ky, ix = ox - 1 + kx;
              float want = (iy < 0 || iy >= 5 || ix < 0 || ix >= 4)
                             ? 0.f
                             : x[((b * 5 + iy) * 4 + ix) * 3 + c];
              size_t row = (static_cast<size_t>(b) * oh + oy) * ow + ox;
              BOOST_REQUIRE(cols[row * patch + (ky * 3 + kx) * 3 + c] == want);
            }
  // <im2col(x), g> == <x, col2im(g)>
  auto g = random_vector(cols.size(), 9);
  std::vector<float> dx(x.size());
  be->col2im(g.data(), s, dx.data());
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < cols.size(); ++i)
    lhs += double(cols[i]) * g[i];
  for (size_t i = 0; i < x.size(); ++i)
    rhs += double(x[i]) * dx[i];
  BOOST_TEST(lhs == rhs, boost::test_tools::tolerance(1e-6)); // float inputs
}

BOOST_AUTO_TEST_CASE(maxpool_forward_and_backward) {
  auto be = make_cpu_backend(1);
  const int b = 2, h = 4, w = 6, c = 3;
  auto x = random_vector(static_cast<size_t>(b * h * w * c), 10);
  const int oh = 2, ow = 3;
  std::vector<float> y(static_cast<size_t>(b * oh * ow * c));
  std::vector<int32_t> arg(y.size());
  be->maxpool_forward(x.data(), b, h, w, c, 2, 2, y.data(), arg.data());
  auto dy = random_vector(y.size(), 11);
  std::vector<float> dx(x.size()), dwant(x.size(), 0.f);
  for (int n = 0; n < b; ++n)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int ch = 0; ch < c; ++ch) {
          float best = -1e30f;
          size_t where = 0;
          for (int ky = 0; ky < 2; ++ky)
            for (int kx = 0; kx < 2; ++kx) {
              size_t i = ((static_cast<size_t>(n) * h + oy * 2 + ky) * w
                          + ox * 2 + kx)
                           * c
                         + ch;
              if (x[i] > best) {
                best = x[i];
                where = i;
              }
            }
          size_t o = ((static_cast<size_t>(n) * oh + oy) * ow + ox) * c + ch;
          BOOST_REQUIRE(y[o] == best);
          dwant[where] += dy[o];
        }
  be->maxpool_backward(dy.data(), arg.data(), y.size(), dx.data(), dx.size());
  check_close(dx, dwant, 0, "maxpool_backward");
}

BOOST_AUTO_TEST_CASE(memory_ops_and_description) {
  auto be = make_cpu_backend(2);
  BOOST_TEST(be->host_accessible());
  BOOST_TEST(be->describe().find("cpu (OpenBLAS ") == 0, be->describe());
  auto buf = be->allocate(3 << 20); // huge-page path
  be->fill(buf.floats(), (3 << 20) / 4, 2.f);
  std::vector<float> host(4, 1.f);
  be->upload(buf.floats(), host.data(), 16);
  be->axpy(4, 0.5f, buf.floats() + 4, buf.floats());
  be->download(host.data(), buf.floats(), 16);
  BOOST_TEST(host == (std::vector<float>{2.f, 2.f, 2.f, 2.f}));
}

BOOST_AUTO_TEST_CASE(host_buffers_are_plain_memory_that_uploads_read) {
  auto be = make_cpu_backend(1);
  auto host = be->allocate_host(100 * sizeof(float));
  auto dev = be->allocate(100 * sizeof(float));
  for (int i = 0; i < 100; ++i)
    host.floats()[i] = static_cast<float>(i);
  be->upload(dev.floats(), host.floats(), 100 * sizeof(float));
  BOOST_TEST(dev.floats()[99] == 99.f);
  BOOST_TEST(host.bytes() == 100 * sizeof(float));
  auto moved = std::move(host); // freed once, by release_host
  BOOST_TEST(moved.floats()[7] == 7.f);
}

BOOST_AUTO_TEST_SUITE_END()
