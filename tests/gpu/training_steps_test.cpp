// Whole training steps of the MLP and the CNN on the GPU against the CPU
// backend: the same parameters and batches must give the same loss,
// gradients and updated parameters, to a tolerance for the different
// order of floating-point sums.
#include <boost/test/unit_test.hpp>

#include "cuda_device.hpp"
#include "runtime/base/build_config.hpp"

#if TROUPE_HAVE_CUDA

#include <cmath>
#include <vector>

#include "gpu/gpu_backend.hpp"
#include "models/model.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/base/random.hpp"
#include "test_util.hpp"

using namespace troupe;

namespace {

model_config mlp() {
  model_config cfg;
  cfg.type = model_config::kind::mlp;
  cfg.hidden = {256, 128};
  return cfg;
}

model_config cnn() {
  model_config cfg;
  cfg.type = model_config::kind::cnn;
  cfg.hidden = {};
  cfg.conv_channels = {32, 64};
  cfg.kernel_size = 5;
  return cfg;
}

/// A Fashion-MNIST-shaped batch: pixels in [0, 1], labels 0..9.
struct batch_data {
  std::vector<float> x;
  std::vector<int32_t> y;
};

batch_data make_batch(int n, uint64_t seed) {
  splitmix64 rng{seed};
  batch_data b;
  b.x.resize(static_cast<size_t>(n) * 784);
  for (auto& v : b.x)
    v = static_cast<float>(rng.uniform01());
  b.y.resize(static_cast<size_t>(n));
  for (auto& l : b.y)
    l = static_cast<int32_t>(rng.uniform01() * 10) % 10;
  return b;
}

/// The largest |a - b| / (1 + |b|).
double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double out = 0;
  for (size_t i = 0; i < a.size(); ++i)
    out = std::max(out, std::fabs(double(a[i]) - b[i]) / (1 + std::fabs(b[i])));
  return out;
}

struct twin_models {
  std::unique_ptr<compute_backend> cpu = make_cpu_backend(1);
  std::unique_ptr<gpu::gpu_backend> gpu;
  std::unique_ptr<model> on_cpu, on_gpu;

  explicit twin_models(const model_config& cfg) {
    auto made = gpu::make_gpu_backend(0);
    BOOST_REQUIRE_MESSAGE(made, test::why(made));
    gpu = std::move(*made);
    auto a = make_model(cfg, 28, 28, 1, 10, *cpu);
    auto b = make_model(cfg, 28, 28, 1, 10, *gpu);
    BOOST_REQUIRE(a && b);
    on_cpu = std::move(*a);
    on_gpu = std::move(*b);
  }

  std::vector<float> params(model& m) {
    std::vector<float> out(m.layout().total());
    m.get_params(out.data());
    return out;
  }
  std::vector<float> grads(model& m) {
    std::vector<float> out(m.layout().total());
    m.get_grads(out.data());
    return out;
  }
};

void same_step(const model_config& cfg, int batch) {
  twin_models t{cfg};
  BOOST_TEST_MESSAGE(t.on_gpu->summary()
                     << ", batch " << batch << " on " << t.gpu->describe());
  BOOST_TEST(worst(t.params(*t.on_gpu), t.params(*t.on_cpu)) == 0.0);
  auto b = make_batch(batch, 3);
  auto want = t.on_cpu->forward_backward(b.x.data(), b.y.data(), batch);
  auto got = t.on_gpu->forward_backward(b.x.data(), b.y.data(), batch);
  BOOST_TEST(std::fabs(got.loss_sum - want.loss_sum) <= 1e-4 * want.loss_sum,
             got.loss_sum << " vs " << want.loss_sum);
  BOOST_TEST(got.correct == want.correct);
  double g = worst(t.grads(*t.on_gpu), t.grads(*t.on_cpu));
  BOOST_TEST_MESSAGE("gradients differ by at most " << g);
  BOOST_TEST(g <= 1e-5);
}

void same_sgd_steps(const model_config& cfg, int batch, int steps) {
  twin_models t{cfg};
  for (int s = 0; s < steps; ++s) {
    auto b = make_batch(batch, 10 + s);
    auto want = t.on_cpu->sgd_step(b.x.data(), b.y.data(), batch, 0.05f);
    auto got = t.on_gpu->sgd_step(b.x.data(), b.y.data(), batch, 0.05f);
    BOOST_TEST(std::fabs(got.loss_sum - want.loss_sum) <= 1e-4 * want.loss_sum,
               "step " << s << ": " << got.loss_sum << " vs " << want.loss_sum);
  }
  double p = worst(t.params(*t.on_gpu), t.params(*t.on_cpu));
  BOOST_TEST_MESSAGE(steps << " SGD steps: parameters differ by at most " << p);
  BOOST_TEST(p <= 1e-5);
  // Evaluation (forward only) on a batch neither saw.
  auto b = make_batch(300, 99);
  auto want = t.on_cpu->forward(b.x.data(), b.y.data(), 300);
  auto got = t.on_gpu->forward(b.x.data(), b.y.data(), 300);
  BOOST_TEST(std::fabs(got.loss_sum - want.loss_sum) <= 1e-4 * want.loss_sum);
  BOOST_TEST(std::abs(got.correct - want.correct) <= 1);
}

} // namespace

BOOST_AUTO_TEST_SUITE(training_steps,
                      *boost::unit_test::precondition(test::has_cuda_device))

BOOST_AUTO_TEST_CASE(mlp_gradients_match_the_cpu) {
  same_step(mlp(), 128);
}

BOOST_AUTO_TEST_CASE(mlp_odd_batch_gradients_match_the_cpu) {
  same_step(mlp(), 37);
}

BOOST_AUTO_TEST_CASE(cnn_gradients_match_the_cpu) {
  same_step(cnn(), 16);
}

BOOST_AUTO_TEST_CASE(mlp_sgd_steps_match_the_cpu) {
  same_sgd_steps(mlp(), 128, 5);
}

BOOST_AUTO_TEST_CASE(cnn_sgd_steps_match_the_cpu) {
  same_sgd_steps(cnn(), 16, 3);
}

BOOST_AUTO_TEST_SUITE_END()

#else

BOOST_AUTO_TEST_SUITE(training_steps)
BOOST_AUTO_TEST_CASE(built_without_cuda) {
  BOOST_TEST_MESSAGE("skipped: troupe was built without CUDA");
  BOOST_TEST(!TROUPE_HAVE_CUDA);
}
BOOST_AUTO_TEST_SUITE_END()

#endif
