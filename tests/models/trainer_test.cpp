#include "models/trainer.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <sstream>

#include "models/checkpoint_model.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

run_config synthetic_run() {
  run_config cfg;
  cfg.name = "synthetic";
  cfg.model.type = model_config::kind::mlp;
  cfg.model.hidden = {16};
  cfg.data.format = data_config::kind::synthetic;
  cfg.data.width = 12;
  cfg.data.classes = 4;
  cfg.data.train_samples = 500;
  cfg.data.test_samples = 200;
  cfg.training.batch_size = 32;
  cfg.training.epochs = 3;
  cfg.training.log_every_steps = 10;
  cfg.training.optimizer.type = optimizer_config::kind::adam;
  cfg.training.optimizer.learning_rate = 0.01;
  return cfg;
}

/// `cfg` trained by run_local_training on its data set and one CPU
/// thread, the run's log written to `log`.
caf::expected<run_summary> train(const run_config& cfg, std::ostream& log) {
  auto data = load_datasets(cfg.data);
  BOOST_REQUIRE(data);
  auto be = make_cpu_backend(1);
  return run_local_training(cfg, *data, *be, log);
}

} // namespace

BOOST_AUTO_TEST_SUITE(trainer)

BOOST_AUTO_TEST_CASE(learns_a_separable_problem) {
  auto cfg = synthetic_run();
  std::ostringstream log;
  auto summary = train(cfg, log);
  BOOST_REQUIRE_MESSAGE(summary, troupe::test::why(summary));
  BOOST_TEST(summary->steps == 3 * 16); // ceil(500 / 32) = 16 per epoch
  BOOST_TEST(summary->epochs == 3);
  BOOST_TEST(summary->test.accuracy > 0.95, log.str());
  BOOST_TEST(log.str().find("step 10, epoch 1, loss = ") != std::string::npos);
  BOOST_TEST(log.str().find("examples/sec; ") != std::string::npos);
}

// A click model needs the shards' embedding table: troupe-train says where
// to run it instead of training the dense part on no rows.
BOOST_AUTO_TEST_CASE(refuses_a_click_model_naming_troupe_node) {
  auto cfg = synthetic_run();
  cfg.model.type = model_config::kind::click;
  std::ostringstream log;
  auto r = train(cfg, log);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::invalid_config));
  BOOST_TEST(describe(r.error()).find("train it with troupe-node")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(layer_list_with_dropout_and_layernorm_learns) {
  auto cfg = synthetic_run();
  cfg.model.type = model_config::kind::layers;
  layer_spec flatten, dense, norm, drop, out;
  flatten.type = layer_spec::kind::flatten;
  dense.units = 32;
  dense.act = layer_activation::gelu;
  norm.type = layer_spec::kind::layernorm;
  drop.type = layer_spec::kind::dropout;
  drop.rate = 0.2;
  out.units = 4;
  cfg.model.layers = {flatten, dense, norm, drop, out};
  std::ostringstream log;
  auto summary = train(cfg, log);
  BOOST_REQUIRE_MESSAGE(summary, troupe::test::why(summary));
  BOOST_TEST(summary->test.accuracy > 0.95, log.str());
  BOOST_TEST(log.str().find("model: layers 12: dense 12->32 identity, "
                            "gelu, "
                            "layernorm 32 eps 1e-05, dropout 0.2, "
                            "dense 32->4 identity")
               != std::string::npos,
             log.str());
}

// troupe-predict's way back from a checkpoint alone: a layer list's
// checkpoint rebuilds the very model (its layers from the config lines the
// checkpoint records), which scores what the run scored.
BOOST_AUTO_TEST_CASE(a_layer_list_model_comes_back_from_its_checkpoint) {
  auto cfg = synthetic_run();
  cfg.data.height = 4;
  cfg.data.width = 3;
  cfg.model.type = model_config::kind::layers;
  layer_spec conv, norm, flatten, drop, out;
  conv.type = layer_spec::kind::conv2d;
  conv.filters = 3;
  conv.stride = 2;
  conv.padding = 1;
  conv.act = layer_activation::gelu;
  norm.type = layer_spec::kind::layernorm;
  flatten.type = layer_spec::kind::flatten;
  drop.type = layer_spec::kind::dropout;
  drop.rate = 0.1;
  out.units = 4;
  cfg.model.layers = {conv, norm, flatten, drop, out};
  temp_dir dir;
  cfg.training.checkpoint.dir = dir.path();
  auto data = load_datasets(cfg.data);
  BOOST_REQUIRE(data);
  auto be = make_cpu_backend(1);
  std::ostringstream log;
  auto summary = run_local_training(cfg, *data, *be, log);
  BOOST_REQUIRE_MESSAGE(summary, troupe::test::why(summary));
  auto path = dir.file("ckpt-48.safetensors");
  auto ckpt = read_checkpoint(path);
  BOOST_REQUIRE_MESSAGE(ckpt, troupe::test::why(ckpt));
  auto m = model_from_checkpoint(*ckpt, path, 4, 3, 1, *be);
  BOOST_REQUIRE_MESSAGE(m, troupe::test::why(m));
  BOOST_TEST((*m)->summary().find("conv 3x3/2 1->3 identity, gelu, "
                                  "layernorm 3 eps 1e-05")
               != std::string::npos,
             (*m)->summary());
  const auto& test = data->test;
  auto scored = (*m)->forward(test.features.to_floats().data(),
                              test.labels.data(), static_cast<int>(test.count));
  BOOST_TEST(static_cast<double>(scored.correct)
               == summary->test.accuracy * static_cast<double>(test.count),
             boost::test_tools::tolerance(1e-9));
}

// A shorthand is its layer list: written out, the same model trains to
// the same numbers.
BOOST_AUTO_TEST_CASE(mlp_shorthand_and_its_layer_list_train_alike) {
  auto shorthand = synthetic_run();
  auto listed = shorthand;
  listed.model.type = model_config::kind::layers;
  layer_spec flatten, hidden, out;
  flatten.type = layer_spec::kind::flatten;
  hidden.units = 16;
  hidden.act = layer_activation::relu;
  out.units = 4;
  listed.model.layers = {flatten, hidden, out};
  auto data = load_datasets(shorthand.data);
  BOOST_REQUIRE(data);
  auto be = make_cpu_backend(1);
  std::ostringstream log_a, log_b;
  auto a = run_local_training(shorthand, *data, *be, log_a);
  auto b = run_local_training(listed, *data, *be, log_b);
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(b);
  BOOST_TEST(a->test.loss == b->test.loss);
  BOOST_TEST(a->test.accuracy == b->test.accuracy);
}

BOOST_AUTO_TEST_CASE(resume_continues_bitwise) {
  auto cfg = synthetic_run();
  auto data = load_datasets(cfg.data);
  BOOST_REQUIRE(data);
  auto be = make_cpu_backend(1);
  temp_dir straight, split;
  std::ostringstream log;
  // Straight through 40 steps (crosses an epoch boundary at 16 and 32).
  cfg.training.max_steps = 40;
  cfg.training.checkpoint.dir = straight.path();
  BOOST_REQUIRE(run_local_training(cfg, *data, *be, log));
  // 20 steps, stop, resume to 40.
  cfg.training.checkpoint.dir = split.path();
  cfg.training.max_steps = 20;
  BOOST_REQUIRE(run_local_training(cfg, *data, *be, log));
  cfg.training.max_steps = 40;
  cfg.training.checkpoint.resume = true;
  BOOST_REQUIRE(run_local_training(cfg, *data, *be, log));
  BOOST_TEST(log.str().find("resume: step 20 from ") != std::string::npos);
  auto a = read_checkpoint(straight.file("ckpt-40.safetensors"));
  auto b = read_checkpoint(split.file("ckpt-40.safetensors"));
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(b);
  BOOST_TEST(a->step == 40);
  BOOST_TEST(b->step == 40);
  BOOST_REQUIRE(a->params.size() == b->params.size());
  BOOST_TEST(
    std::memcmp(a->params.data(), b->params.data(), a->params.size() * 4) == 0);
  BOOST_REQUIRE(a->slots.size() == 2u);
  BOOST_TEST(a->slots[1].second == b->slots[1].second);
  BOOST_TEST(newest_checkpoint(split.path())
             == split.file("ckpt-40.safetensors"));
}

BOOST_AUTO_TEST_CASE(resume_refuses_another_model_or_optimizer) {
  auto cfg = synthetic_run();
  auto data = load_datasets(cfg.data);
  auto be = make_cpu_backend(1);
  temp_dir dir;
  std::ostringstream log;
  cfg.training.max_steps = 5;
  cfg.training.checkpoint.dir = dir.path();
  BOOST_REQUIRE(run_local_training(cfg, *data, *be, log));
  cfg.training.checkpoint.resume = true;
  auto other = cfg;
  other.model.hidden = {17};
  auto r = run_local_training(other, *data, *be, log);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::layout_mismatch));
  BOOST_TEST(describe(r.error()).find("ckpt-5.safetensors (resume digest ")
               != std::string::npos,
             describe(r.error()));
  BOOST_TEST(describe(r.error()).find("/model/hidden (checkpoint: [16], this "
                                      "run: [17])")
               != std::string::npos,
             describe(r.error()));
  other = cfg;
  other.training.optimizer.type = optimizer_config::kind::sgd;
  r = run_local_training(other, *data, *be, log);
  BOOST_REQUIRE(!r);
  BOOST_TEST(describe(r.error()).find(
               "/training/optimizer/type (checkpoint: adam, this run: sgd)")
               != std::string::npos,
             describe(r.error()));
}

BOOST_AUTO_TEST_CASE(nan_loss_stops_the_run) {
  auto cfg = synthetic_run();
  cfg.training.optimizer.type = optimizer_config::kind::sgd;
  cfg.training.optimizer.learning_rate = 1e30;
  std::ostringstream log;
  auto r = train(cfg, log);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == errc::non_finite));
  BOOST_TEST(describe(r.error()).find("loss became ") == 0,
             describe(r.error()));
}

namespace {

/// One sgd_step() against forward_backward() plus optimizer::apply() from
/// the same parameters and batch: the fused path must be the same update.
void check_fused_sgd_matches(const model_config& mcfg, int side, int channels) {
  auto be = make_cpu_backend(1);
  auto fused = std::move(*make_model(mcfg, side, side, channels, 4, *be));
  auto plain = std::move(*make_model(mcfg, side, side, channels, 4, *be));
  auto init = fused->initial_params();
  fused->set_params(init.data());
  plain->set_params(init.data());
  const int batch = 8;
  splitmix64 rng{7};
  std::vector<float> x(batch * fused->input_size());
  std::vector<int32_t> y(batch);
  for (auto& v : x)
    v = static_cast<float>(rng.uniform01());
  for (auto& v : y)
    v = static_cast<int32_t>(rng.below(4));
  optimizer_config ocfg;
  ocfg.type = optimizer_config::kind::sgd;
  ocfg.learning_rate = 0.5; // large, so that a missed update shows
  optimizer opt{ocfg, init.size()};
  auto fused_loss = fused->sgd_step(x.data(), y.data(), batch, 0.5f);
  auto plain_loss = plain->forward_backward(x.data(), y.data(), batch);
  opt.apply(plain->params(), plain->grads(), 0);
  BOOST_TEST(fused_loss.loss_sum == plain_loss.loss_sum);
  std::vector<float> a(init.size()), b(init.size());
  fused->get_params(a.data());
  plain->get_params(b.data());
  double moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST(a[i] == b[i], boost::test_tools::tolerance(1e-4f));
    moved += std::abs(static_cast<double>(b[i]) - init[i]);
  }
  BOOST_TEST(moved > 1e-3); // the step did change the parameters
}

} // namespace

BOOST_AUTO_TEST_CASE(fused_sgd_step_matches_gradient_then_update) {
  model_config mlp;
  mlp.type = model_config::kind::mlp;
  mlp.hidden = {16, 8};
  check_fused_sgd_matches(mlp, 6, 1);
  model_config cnn;
  cnn.type = model_config::kind::cnn;
  cnn.conv_channels = {4, 4};
  cnn.hidden = {8};
  check_fused_sgd_matches(cnn, 8, 3);
}

BOOST_AUTO_TEST_SUITE_END()
