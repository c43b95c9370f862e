// Every backend operation on the GPU against the CPU backend (itself
// checked against plain loops in tests/runtime/compute/cpu_backend_test.cpp),
// with edge sizes; and device failures as errors that name the call.
#include <boost/test/unit_test.hpp>

#include "cuda_device.hpp"
#include "runtime/base/build_config.hpp"

#if TROUPE_HAVE_CUDA

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "gpu/gpu_backend.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "numeric_check.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

/// A CPU backend and a GPU backend side by side, with copies both ways.
struct twin {
  std::unique_ptr<compute_backend> cpu = make_cpu_backend(1);
  std::unique_ptr<gpu::gpu_backend> gpu;

  twin() {
    auto made = gpu::make_gpu_backend(0);
    BOOST_REQUIRE_MESSAGE(made, test::why(made));
    gpu = std::move(*made);
    BOOST_TEST_MESSAGE("backend: " << gpu->describe());
  }

  backend_buffer put(const std::vector<float>& host) {
    auto buf = gpu->allocate(host.size() * sizeof(float));
    gpu->upload(buf.floats(), host.data(), host.size() * sizeof(float));
    return buf;
  }
  backend_buffer put(const std::vector<int32_t>& host) {
    auto buf = gpu->allocate(host.size() * sizeof(int32_t));
    gpu->upload(buf.ints(), host.data(), host.size() * sizeof(int32_t));
    return buf;
  }
  std::vector<float> get(const backend_buffer& buf, size_t n) {
    std::vector<float> host(n);
    gpu->download(host.data(), buf.floats(), n * sizeof(float));
    return host;
  }
  std::vector<int32_t> get_ints(const backend_buffer& buf, size_t n) {
    std::vector<int32_t> host(n);
    gpu->download(host.data(), buf.ints(), n * sizeof(int32_t));
    return host;
  }
};

const std::array<activation, 4> activations{activation::identity,
                                            activation::sigmoid,
                                            activation::tanh, activation::relu};

} // namespace

BOOST_AUTO_TEST_SUITE(backend_ops,
                      *boost::unit_test::precondition(test::has_cuda_device))

BOOST_AUTO_TEST_CASE(upload_and_download_round_trip_every_size) {
  twin t;
  // 0, 1, odd, and more than the two 4 MiB staging slots.
  for (size_t n : {size_t{0}, size_t{1}, size_t{1001}, size_t{3} << 20}) {
    auto host = random_vector(n, n + 1);
    auto src = host;
    auto buf = t.gpu->allocate(n * sizeof(float));
    t.gpu->upload(buf.floats(), src.data(), n * sizeof(float));
    // upload() returns before its DMA is done, but it has copied src:
    // the caller may reuse src at once.
    std::fill(src.begin(), src.end(), 7.f);
    BOOST_TEST((t.get(buf, n) == host), "round trip of " << n << " floats");
  }
}

BOOST_AUTO_TEST_CASE(uploads_from_host_buffers_skip_the_staging_copy) {
  twin t;
  // 12 MiB: through the 4 MiB staging slots it would be three DMAs.
  const size_t n = size_t{3} << 20;
  auto host = t.gpu->allocate_host(n * sizeof(float));
  auto values = random_vector(n, 17);
  std::copy(values.begin(), values.end(), host.floats());
  auto dev = t.gpu->allocate(n * sizeof(float));
  t.gpu->set_profiling(true);
  t.gpu->upload(dev.floats(), host.floats(), n * sizeof(float));
  auto split = t.gpu->profile();
  BOOST_TEST(split.copy_ops == 1);
  t.gpu->set_profiling(false);
  BOOST_TEST((t.get(dev, n) == values));
  // A slice inside the buffer is one DMA too.
  t.gpu->set_profiling(true);
  t.gpu->upload(dev.floats(), host.floats() + 1000, 5000 * sizeof(float));
  BOOST_TEST(t.gpu->profile().copy_ops == 1);
  t.gpu->set_profiling(false);
  auto back = t.get(dev, 5000);
  BOOST_TEST(
    (back == std::vector<float>(values.begin() + 1000, values.begin() + 6000)));
}

BOOST_AUTO_TEST_CASE(fill_and_axpy) {
  twin t;
  for (size_t n : {size_t{0}, size_t{1}, size_t{12345}}) {
    auto x = random_vector(n, 1), y = random_vector(n, 2);
    auto gx = t.put(x), gy = t.put(y);
    t.cpu->axpy(n, -0.3f, x.data(), y.data());
    t.gpu->axpy(n, -0.3f, gx.floats(), gy.floats());
    check_close(t.get(gy, n), y, 1e-6f, "axpy");
    for (float v : {0.f, 2.5f}) {
      t.gpu->fill(gy.floats(), n, v);
      BOOST_TEST((t.get(gy, n) == std::vector<float>(n, v)));
    }
  }
}

BOOST_AUTO_TEST_CASE(gemm_all_transposes_strides_and_edge_sizes) {
  twin t;
  for (auto [m, n, k] : gemm_sizes({{128, 256, 784}}))
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.f, 1.f, 0.25f}) {
          // Row strides wider than the matrices, to catch a swapped ld.
          int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
          auto a = random_vector(static_cast<size_t>(ta ? k : m) * lda, 1);
          auto b = random_vector(static_cast<size_t>(tb ? n : k) * ldb, 2);
          auto c = random_vector(static_cast<size_t>(m) * ldc, 3);
          if (beta == 0.f && !c.empty())
            c[0] = std::numeric_limits<float>::quiet_NaN(); // must not leak
          auto ga = t.put(a), gb = t.put(b), gc = t.put(c);
          t.cpu->gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta,
                      c.data(), ldc);
          t.gpu->gemm(ta, tb, m, n, k, 0.5f, ga.floats(), lda, gb.floats(), ldb,
                      beta, gc.floats(), ldc);
          check_close(t.get(gc, c.size()), c, 1e-5f,
                      "gemm m=" + std::to_string(m) + " n=" + std::to_string(n)
                        + " k=" + std::to_string(k) + " ta="
                        + std::to_string(ta) + " tb=" + std::to_string(tb)
                        + " beta=" + std::to_string(beta));
        }
}

BOOST_AUTO_TEST_CASE(bias_activation_forward_and_backward) {
  twin t;
  for (auto [rows, cols] : std::vector<std::array<int, 2>>{
         {0, 5}, {1, 1}, {7, 33}, {128, 256}, {1000, 10}})
    for (auto act : activations)
      for (bool with_bias : {false, true}) {
        size_t n = static_cast<size_t>(rows) * cols;
        auto y = random_vector(n, 4, -3, 3);
        auto bias = random_vector(static_cast<size_t>(cols), 5);
        auto gy = t.put(y), gbias = t.put(bias);
        const float* cb = with_bias ? bias.data() : nullptr;
        const float* gb = with_bias ? gbias.floats() : nullptr;
        t.cpu->bias_activation_forward(act, y.data(), cb, rows, cols);
        t.gpu->bias_activation_forward(act, gy.floats(), gb, rows, cols);
        std::string label = std::string{"forward "} + to_string(act);
        check_close(t.get(gy, n), y, 1e-6f, label);
        auto dy = random_vector(n, 6);
        auto gdy = t.put(dy);
        t.cpu->activation_backward(act, y.data(), dy.data(), n);
        t.gpu->activation_backward(act, gy.floats(), gdy.floats(), n);
        check_close(t.get(gdy, n), dy, 1e-6f,
                    std::string{"backward "} + to_string(act));
      }
}

BOOST_AUTO_TEST_CASE(bias_backward_sums_columns) {
  twin t;
  // Up to the CNN's shape at batch 128: 128*28*28 rows of 32 channels.
  for (auto [rows, cols] : std::vector<std::array<int, 2>>{
         {0, 3}, {1, 1}, {7, 33}, {1024, 256}, {100352, 32}, {300, 300}}) {
    size_t n = static_cast<size_t>(rows) * cols;
    auto dy = random_vector(n, 7);
    std::vector<float> db(static_cast<size_t>(cols), 9.f);
    auto gdy = t.put(dy), gdb = t.put(db);
    t.cpu->bias_backward(dy.data(), db.data(), rows, cols);
    t.gpu->bias_backward(gdy.floats(), gdb.floats(), rows, cols);
    // Sums of up to 100k terms in another order: ~sqrt(rows) ulps.
    check_close(t.get(gdb, db.size()), db, 2e-4f,
                "bias_backward " + std::to_string(rows) + "x"
                  + std::to_string(cols));
  }
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_loss_hits_and_gradient) {
  twin t;
  for (auto [rows, classes] : std::vector<std::array<int, 2>>{
         {0, 10}, {1, 1}, {1, 10}, {128, 10}, {1000, 17}})
    for (bool with_grad : {false, true}) {
      auto logits = random_vector(static_cast<size_t>(rows) * classes, 8, -8,
                                  8);
      std::vector<int32_t> labels(static_cast<size_t>(rows));
      for (int r = 0; r < rows; ++r)
        labels[r] = (r * 7) % classes;
      std::vector<float> d(logits.size(), 0.f);
      auto gl = t.put(logits), gd = t.put(d);
      auto glabels = t.put(labels);
      float scale = rows > 0 ? 1.f / static_cast<float>(rows) : 1.f;
      auto want = t.cpu->softmax_cross_entropy(logits.data(), labels.data(),
                                               rows, classes,
                                               with_grad ? d.data() : nullptr,
                                               scale);
      auto got = t.gpu->softmax_cross_entropy(gl.floats(), glabels.ints(), rows,
                                              classes,
                                              with_grad ? gd.floats() : nullptr,
                                              scale);
      BOOST_TEST(got.correct == want.correct);
      BOOST_TEST(std::fabs(got.loss_sum - want.loss_sum)
                   <= 1e-9 * (1 + std::fabs(want.loss_sum)),
                 got.loss_sum << " vs " << want.loss_sum);
      if (with_grad)
        check_close(t.get(gd, d.size()), d, 1e-6f, "dlogits");
    }
}

BOOST_AUTO_TEST_CASE(a_label_out_of_range_gives_a_nan_loss_not_a_crash) {
  twin t;
  auto logits = random_vector(20, 9);
  std::vector<int32_t> labels{3, 12}; // 12 >= 10 classes
  auto gl = t.put(logits);
  auto glabels = t.put(labels);
  auto got = t.gpu->softmax_cross_entropy(gl.floats(), glabels.ints(), 2, 10,
                                          nullptr, 1.f);
  BOOST_TEST(std::isnan(got.loss_sum));
}

BOOST_AUTO_TEST_CASE(im2col_and_col2im_every_geometry) {
  twin t;
  using shape = compute_backend::conv_shape;
  for (shape s : {shape{1, 1, 1, 1, 1, 1, 0}, shape{2, 5, 7, 3, 3, 1, 1},
                  shape{3, 8, 8, 2, 5, 1, 2}, shape{2, 9, 6, 4, 3, 2, 1},
                  shape{2, 6, 6, 1, 2, 2, 0}, shape{0, 4, 4, 1, 3, 1, 1},
                  shape{4, 14, 14, 32, 5, 1, 2}}) {
    size_t n_x = static_cast<size_t>(s.batch) * s.height * s.width * s.channels;
    size_t n_cols = static_cast<size_t>(s.batch) * s.out_height()
                    * s.out_width() * s.patch();
    auto x = random_vector(n_x, 10);
    std::vector<float> cols(n_cols, 5.f);
    auto gx = t.put(x), gcols = t.put(cols);
    t.cpu->im2col(x.data(), s, cols.data());
    t.gpu->im2col(gx.floats(), s, gcols.floats());
    std::string geometry =
      std::to_string(s.batch) + "x" + std::to_string(s.height) + "x"
      + std::to_string(s.width) + "x" + std::to_string(s.channels) + " k"
      + std::to_string(s.kernel) + " s" + std::to_string(s.stride) + " p"
      + std::to_string(s.pad);
    check_close(t.get(gcols, n_cols), cols, 0.f, "im2col " + geometry);
    auto dcols = random_vector(n_cols, 11);
    std::vector<float> dx(n_x, 5.f);
    auto gdcols = t.put(dcols), gdx = t.put(dx);
    t.cpu->col2im(dcols.data(), s, dx.data());
    t.gpu->col2im(gdcols.floats(), s, gdx.floats());
    check_close(t.get(gdx, n_x), dx, 1e-5f, "col2im " + geometry);
  }
}

BOOST_AUTO_TEST_CASE(maxpool_forward_and_backward) {
  twin t;
  struct pool {
    int batch, h, w, c, size, stride;
  };
  for (pool p : {pool{1, 2, 2, 1, 2, 2}, pool{3, 28, 28, 32, 2, 2},
                 pool{2, 7, 9, 3, 3, 2}, pool{0, 4, 4, 2, 2, 2}}) {
    int oh = (p.h - p.size) / p.stride + 1, ow = (p.w - p.size) / p.stride + 1;
    size_t n_x = static_cast<size_t>(p.batch) * p.h * p.w * p.c;
    size_t n_y = static_cast<size_t>(p.batch) * oh * ow * p.c;
    auto x = random_vector(n_x, 12);
    std::vector<float> y(n_y);
    std::vector<int32_t> argmax(n_y);
    auto gx = t.put(x), gy = t.put(y);
    auto gargmax = t.put(argmax);
    t.cpu->maxpool_forward(x.data(), p.batch, p.h, p.w, p.c, p.size, p.stride,
                           y.data(), argmax.data());
    t.gpu->maxpool_forward(gx.floats(), p.batch, p.h, p.w, p.c, p.size,
                           p.stride, gy.floats(), gargmax.ints());
    check_close(t.get(gy, n_y), y, 0.f, "maxpool forward");
    BOOST_TEST((t.get_ints(gargmax, n_y) == argmax));
    auto dy = random_vector(n_y, 13);
    std::vector<float> dx(n_x, 5.f);
    auto gdy = t.put(dy), gdx = t.put(dx);
    t.cpu->maxpool_backward(dy.data(), argmax.data(), n_y, dx.data(), n_x);
    t.gpu->maxpool_backward(gdy.floats(), gargmax.ints(), n_y, gdx.floats(),
                            n_x);
    // Overlapping windows (size 3, stride 2) add in another order.
    check_close(t.get(gdx, n_x), dx, 1e-6f, "maxpool backward");
  }
}

BOOST_AUTO_TEST_CASE(profiling_splits_kernel_and_copy_time) {
  twin t;
  auto host = random_vector(1 << 20, 14);
  t.gpu->set_profiling(true);
  auto buf = t.put(host);
  t.gpu->axpy(host.size(), 2.f, buf.floats(), buf.floats());
  (void)t.get(buf, host.size());
  auto split = t.gpu->profile();
  BOOST_TEST_MESSAGE(
    "kernels " << split.kernel_ms << " ms in " << split.kernel_ops
               << ", copies " << split.copy_ms << " ms in " << split.copy_ops);
  BOOST_TEST(split.kernel_ops == 1);
  BOOST_TEST(split.copy_ops == 2);
  BOOST_TEST(split.kernel_ms > 0);
  BOOST_TEST(split.copy_ms > 0);
}

BOOST_AUTO_TEST_CASE(a_failing_call_is_an_error_that_names_it) {
  twin t;
  // cuBLAS refuses a leading dimension smaller than the matrix.
  auto a = t.put(random_vector(16, 15));
  try {
    t.gpu->gemm(false, false, 4, 4, 4, 1.f, a.floats(), 1, a.floats(), 4, 0.f,
                a.floats(), 4);
    BOOST_ERROR("a bad leading dimension was accepted");
  } catch (const backend_error& e) {
    BOOST_TEST_MESSAGE(e.what());
    BOOST_TEST(std::string{e.what()}.find("cublasSgemm") != std::string::npos,
               e.what());
  }
  // More memory than any GPU has.
  try {
    (void)t.gpu->allocate(size_t{1} << 50);
    BOOST_ERROR("a 1 PiB allocation succeeded");
  } catch (const backend_error& e) {
    BOOST_TEST_MESSAGE(e.what());
    BOOST_TEST(std::string{e.what()}.find("cudaMalloc") != std::string::npos,
               e.what());
  }
  // The backend still works after a refused call.
  auto host = random_vector(5, 16);
  BOOST_TEST((t.get(t.put(host), 5) == host));
}

BOOST_AUTO_TEST_CASE(a_missing_device_is_refused_by_the_factory) {
  auto made = gpu::make_gpu_backend(999);
  BOOST_REQUIRE(!made);
  BOOST_TEST_MESSAGE(test::why(made));
  BOOST_TEST(test::why(made).find("gpu:999") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

#else

BOOST_AUTO_TEST_SUITE(backend_ops)
BOOST_AUTO_TEST_CASE(built_without_cuda) {
  BOOST_TEST_MESSAGE("skipped: troupe was built without CUDA");
  BOOST_TEST(!TROUPE_HAVE_CUDA);
}
BOOST_AUTO_TEST_SUITE_END()

#endif
