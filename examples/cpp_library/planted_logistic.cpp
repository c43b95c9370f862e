// troupe as a C++ library: a model troupe does not have, trained on its
// parameter servers from a program of your own.
//
// The model is a logistic regression whose training step is written here
// (an external_step): troupe's shards hold its two tensors, "w" and "b",
// run the optimizer and checkpoint them; troupe's workers lease batches of
// sample indices, pull the values, call step() and push the gradient it
// writes, under the chief's supervision, every sample once per epoch. The
// data is drawn from a planted model, so the program can check what it
// learnt: it exits 0 when the test accuracy is above 0.9 and w points the
// planted way (cos(w, w*) above 0.95).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/chief/chief.hpp"
#include "actors/protocol/system_config.hpp"
#include "models/external_step.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/checkpoint/declared_params.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"

namespace {

constexpr int features = 16;

/// Samples of the planted model: x ~ N(0, 1), label = [w* . x + b* > 0],
/// one label in twenty flipped (so no model scores above about 0.95).
struct planted_data {
  std::vector<float> x; ///< samples x features
  std::vector<float> y; ///< 0 or 1
  std::vector<float> w_star;

  planted_data(int n, unsigned seed) : w_star(features) {
    std::mt19937 rng{seed};
    std::normal_distribution<float> normal;
    std::mt19937 planted{7}; // the same w* for every set
    for (auto& w : w_star)
      w = normal(planted);
    std::uniform_real_distribution<float> unit;
    for (int i = 0; i < n; ++i) {
      float z = 0.5f;
      for (int j = 0; j < features; ++j) {
        x.push_back(normal(rng));
        z += w_star[j] * x.back();
      }
      bool label = z > 0;
      y.push_back(unit(rng) < 0.05f ? !label : label);
    }
  }
  size_t size() const { return y.size(); }
};

/// sigmoid(w . x_i + b)
float predict(const float* w, float b, const float* x) {
  float z = b;
  for (int j = 0; j < features; ++j)
    z += w[j] * x[j];
  return 1.f / (1.f + std::exp(-z));
}

/// -log p(y) for a prediction p of label y.
double log_loss(float p, float y) {
  return y > 0 ? -std::log(p + 1e-7) : -std::log(1 - p + 1e-7);
}

bool hit(float p, float y) {
  return (p > 0.5f) == (y > 0);
}

/// One worker's step: the mean log loss's gradient over the batch.
class logistic_step : public troupe::external_step {
public:
  explicit logistic_step(const planted_data& data) : data_(data) {}

  caf::expected<troupe::batch_loss> step(const troupe::pulled_params& params,
                                         const std::vector<uint32_t>& samples,
                                         float* grads) override {
    auto& layout = *params.layout;
    const float* w = params.tensor(*layout.find("w"), scratch_w_);
    const float* b = params.tensor(*layout.find("b"), scratch_b_);
    float* gw = grads + layout.find("w")->offset;
    float* gb = grads + layout.find("b")->offset;
    std::fill(grads, grads + layout.total(), 0.f);
    troupe::batch_loss loss;
    auto n = static_cast<float>(samples.size());
    for (auto i : samples) {
      const float* x = &data_.x[size_t{i} * features];
      float p = predict(w, *b, x);
      float y = data_.y[i];
      for (int j = 0; j < features; ++j)
        gw[j] += (p - y) * x[j] / n;
      *gb += (p - y) / n;
      loss.loss_sum += log_loss(p, y);
      loss.correct += hit(p, y);
    }
    return loss;
  }

private:
  const planted_data& data_;
  std::vector<float> scratch_w_, scratch_b_;
};

/// The chief's evaluation on the test set.
troupe::eval_result evaluate(const planted_data& test,
                             const troupe::pulled_params& params) {
  std::vector<float> scratch_w, scratch_b;
  auto& layout = *params.layout;
  const float* w = params.tensor(*layout.find("w"), scratch_w);
  const float* b = params.tensor(*layout.find("b"), scratch_b);
  troupe::eval_result r;
  for (size_t i = 0; i < test.size(); ++i) {
    float p = predict(w, *b, &test.x[i * features]);
    r.accuracy += hit(p, test.y[i]);
    r.loss += log_loss(p, test.y[i]);
  }
  r.count = static_cast<int64_t>(test.size());
  r.accuracy /= static_cast<double>(test.size());
  r.loss /= static_cast<double>(test.size());
  return r;
}

int fail(const std::string& what) {
  std::cerr << "planted_logistic: " << what << std::endl;
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  planted_data train{8000, 1}, test{2000, 2};

  // The model's tensors and their initial values (zeros), in the
  // safetensors file the run config names.
  troupe::declared_params initial;
  initial.layout.add("w", {features});
  initial.layout.add("b", {1});
  initial.values.assign(initial.layout.total(), 0.f);
  std::string params_file = dir + "/planted_logistic.safetensors";
  if (auto err = troupe::write_declared_params(params_file, initial))
    return fail(troupe::describe(err));

  // The run: one process, 2 shards and 2 workers, async SGD, 4 epochs.
  std::string config_text = R"({
    "name": "planted-logistic",
    "model": {"type": "external", "parameters": ")"
                            + params_file + R"("},
    "data": {"format": "external", "train_samples": 8000},
    "training": {"batch_size": 50, "epochs": 4,
                 "optimizer": {"type": "sgd", "learning_rate": 0.2}},
    "cluster": {"shards": 2, "workers": 2, "mode": "async"}
  })";
  auto cfg = troupe::parse_run_config(config_text, "planted_logistic");
  if (!cfg)
    return fail(troupe::describe(cfg.error()));
  auto data = troupe::load_datasets(cfg->data);
  if (!data)
    return fail(troupe::describe(data.error()));

  troupe::chief_options opts;
  opts.cfg = *cfg;
  opts.config_text = config_text;
  opts.data = std::make_shared<const troupe::train_test>(std::move(*data));
  opts.log = &std::cout;
  opts.external = [&train](int32_t) {
    return std::make_shared<logistic_step>(train);
  };
  opts.evaluate = [&test](const troupe::pulled_params& p)
    -> caf::expected<troupe::eval_result> { return evaluate(test, p); };
  std::vector<float> learnt;
  opts.on_finish = [&](const std::vector<float>& values, const auto&) {
    learnt = values;
  };

  caf::actor_system_config sys_cfg;
  troupe::init_config(sys_cfg);
  caf::actor_system sys{sys_cfg};
  auto summary = troupe::run_cluster(sys, std::move(opts));
  if (!summary)
    return fail(troupe::describe(summary.error()));

  // w against the planted w*: their cosine.
  double dot = 0, ww = 0, ss = 0;
  for (int j = 0; j < features; ++j) {
    dot += learnt[j] * train.w_star[j];
    ww += learnt[j] * learnt[j];
    ss += train.w_star[j] * train.w_star[j];
  }
  double cosine = dot / std::sqrt(ww * ss);
  std::printf("test accuracy %.4f, cos(w, w*) %.4f, %lld steps\n",
              summary->test_accuracy, cosine,
              static_cast<long long>(summary->steps));
  return summary->test_accuracy > 0.9 && cosine > 0.95 ? 0 : 1;
}
