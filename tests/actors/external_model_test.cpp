// A model troupe does not compute (model.type "external"), trained by the
// same workers, shards and chief as troupe's own: the parameters a user
// declared in a safetensors file, a step function of the user's that
// computes gradients for the leased sample indices, and checkpoints under
// the user's tensor names.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <mutex>

#include "fixture.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

constexpr int features = 5;
constexpr int samples = 96;

/// The user's data: y = x . w* + b* plus a little noise, in their memory.
struct user_data {
  std::vector<float> x, y;
  user_data() {
    uint32_t state = 12345;
    auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return static_cast<float>(state >> 8) / static_cast<float>(1u << 24)
             - 0.5f;
    };
    for (int i = 0; i < samples; ++i) {
      float t = 0.3f;
      for (int j = 0; j < features; ++j) {
        x.push_back(next());
        t += x.back() * static_cast<float>(j + 1);
      }
      y.push_back(t + 0.01f * next());
    }
  }

  /// Mean squared error's gradient over `batch` at (w, b): what the user's
  /// own code computes; returns the loss sum.
  double gradient(const float* w, float b, const std::vector<uint32_t>& batch,
                  float* gw, float* gb) const {
    double loss = 0;
    std::fill(gw, gw + features, 0.f);
    *gb = 0;
    auto n = static_cast<float>(batch.size());
    for (auto s : batch) {
      float pred = b;
      for (int j = 0; j < features; ++j)
        pred += w[j] * x[s * features + j];
      float err = pred - y[s];
      loss += 0.5 * err * err;
      for (int j = 0; j < features; ++j)
        gw[j] += err * x[s * features + j] / n;
      *gb += err / n;
    }
    return loss;
  }
};

/// The user's step: reads the tensors by name, as the Python module's
/// step function gets them, and records the batches it was given.
struct linear_step : external_step {
  const user_data* data;
  std::mutex* mtx;
  std::vector<std::vector<uint32_t>>* batches;
  bool poison = false; ///< return a NaN loss

  caf::expected<batch_loss> step(const pulled_params& p,
                                 const std::vector<uint32_t>& batch,
                                 float* grads,
                                 std::vector<table_rows>&) override {
    std::vector<float> scratch_w, scratch_b;
    auto& ts = p.layout->tensors();
    const float* w = p.tensor(ts[0], scratch_w);
    const float* b = p.tensor(ts[1], scratch_b);
    batch_loss out;
    out.loss_sum = data->gradient(w, *b, batch, grads + ts[0].offset,
                                  grads + ts[1].offset);
    if (poison)
      out.loss_sum = std::nan("");
    std::lock_guard<std::mutex> guard{*mtx};
    batches->push_back(batch);
    return out;
  }
};

/// Each worker's step, recording into `batches`.
external_step_factory linear_steps(const user_data& data, std::mutex& mtx,
                                   std::vector<std::vector<uint32_t>>& batches,
                                   bool poison = false) {
  return [&data, &mtx, &batches, poison](int32_t) {
    auto s = std::make_shared<linear_step>();
    s->data = &data;
    s->mtx = &mtx;
    s->batches = &batches;
    s->poison = poison;
    return s;
  };
}

run_config external_run(const std::string& params_file) {
  run_config cfg = test::small_run(cluster_config::mode::sync, 1, 2);
  cfg.model = model_config{};
  cfg.model.type = model_config::kind::external;
  cfg.model.parameters = params_file;
  cfg.data = data_config{};
  cfg.data.format = data_config::kind::external;
  cfg.data.train_samples = samples;
  cfg.data.test_samples = 0;
  cfg.training.batch_size = 8;
  cfg.training.epochs = 3;
  cfg.training.optimizer.learning_rate = 0.2;
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_SUITE(external_model)

BOOST_AUTO_TEST_CASE(
  an_external_model_trains_as_a_plain_sgd_loop_over_the_same_batches) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  // The weight vector is cut by the two shards' split (6 floats: 3 and 3):
  // the step reads it gathered, the bias in place.
  std::vector<float> w0{0.1f, -0.2f, 0.3f, 0.0f, 0.05f};
  test::write_user_safetensors(params, {{"linear.weight", "[1,5]", w0},
                                        {"linear.bias", "[]", {0.4f}}});
  auto cfg = external_run(params);
  cfg.training.checkpoint.dir = dir.file("ckpt");
  user_data data;
  std::mutex mtx;
  std::vector<std::vector<uint32_t>> batches;
  cluster_fixture f;
  f.external = linear_steps(data, mtx, batches);
  auto r = f.run(cfg);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_TEST(r->steps == 3 * samples / 8);
  BOOST_REQUIRE(batches.size() == static_cast<size_t>(r->steps));
  // Every sample once per epoch.
  for (int e = 0; e < 3; ++e) {
    std::vector<int> seen(samples, 0);
    for (int i = 0; i < samples / 8; ++i)
      for (auto s : batches[static_cast<size_t>(e * samples / 8 + i)])
        ++seen[s];
    BOOST_TEST(std::count(seen.begin(), seen.end(), 1) == samples);
  }
  // The same batches, in the same order, by hand.
  std::vector<float> w = w0;
  float b = 0.4f;
  for (auto& batch : batches) {
    std::vector<float> gw(features);
    float gb = 0;
    data.gradient(w.data(), b, batch, gw.data(), &gb);
    for (int j = 0; j < features; ++j)
      w[j] -= 0.2f * gw[j];
    b -= 0.2f * gb;
  }
  BOOST_REQUIRE(f.final_params.size() == 6u);
  for (int j = 0; j < features; ++j)
    BOOST_TEST(f.final_params[j] == w[j], boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(f.final_params[5] == b, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(w[4] > 2.f); // it learned: the planted weight is 5, w0 0.05
  // The checkpoint holds the user's names and shapes.
  auto files = list_checkpoints(cfg.training.checkpoint.dir);
  BOOST_REQUIRE(!files.empty());
  auto ck = read_checkpoint(files.front().path);
  BOOST_REQUIRE_MESSAGE(ck, test::why(ck));
  BOOST_TEST(ck->layout.tensors()[0].name == "linear.weight");
  BOOST_TEST((ck->layout.tensors()[0].dims == shape{1, 5}));
  BOOST_TEST(ck->layout.tensors()[1].name == "linear.bias");
  BOOST_TEST(ck->params == f.final_params);
  BOOST_TEST(ck->metadata["model"] == "external (2 tensors, 6 floats)");
}

BOOST_AUTO_TEST_CASE(an_external_step_that_returns_nan_stops_the_run) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  test::write_user_safetensors(params, {{"w", "[5]", {0, 0, 0, 0, 0}},
                                        {"b", "[]", {0}}});
  user_data data;
  std::mutex mtx;
  std::vector<std::vector<uint32_t>> batches;
  cluster_fixture f;
  f.external = linear_steps(data, mtx, batches, true);
  auto r = f.run(external_run(params));
  BOOST_REQUIRE(!r);
  BOOST_TEST(describe(r.error()).find("the loss turned NaN")
               != std::string::npos,
             describe(r.error()));
}

BOOST_AUTO_TEST_CASE(
  a_node_without_a_step_function_cannot_run_an_external_model) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  test::write_user_safetensors(params, {{"w", "[5]", {0, 0, 0, 0, 0}},
                                        {"b", "[]", {0}}});
  auto cfg = external_run(params);
  cfg.cluster.max_restarts = 1;
  cluster_fixture f;
  auto r = f.run(cfg);
  BOOST_REQUIRE(!r);
  BOOST_TEST(f.log.str().find("workers run the user's step function")
               != std::string::npos,
             f.log.str());
}

BOOST_AUTO_TEST_SUITE_END()
