// Every layer's backward pass against central finite differences of the
// model's mean loss, through whole small models (so each layer's dx is
// checked too, by the gradients of the layers before it).
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "models/gradient_check.hpp"
#include "models/layer_list.hpp"
#include "models/model.hpp"
#include "runtime/base/random.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/compute/losses.hpp"
#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"

#include "test_util.hpp"

using namespace troupe;

namespace {

void check_gradients(model_config cfg, int h, int w, int c, int classes,
                     const std::string& label) {
  auto be = make_cpu_backend(1);
  cfg.init = model_config::init_kind::xavier;
  auto made = make_model(cfg, h, w, c, classes, *be);
  BOOST_REQUIRE_MESSAGE(made, troupe::test::why(made));
  model& m = **made;
  const int batch = 3;
  auto data = make_synthetic(batch, h, w, c, classes, 0.3, 5, 6);
  // Float targets for the losses that read them: soft labels in [0, 1]
  // for binary cross-entropy, any reals for squared error.
  std::vector<float> targets;
  if (cfg.loss != loss_kind::softmax_cross_entropy) {
    splitmix64 rng{7};
    targets.resize(static_cast<size_t>(batch) * classes);
    for (auto& t : targets)
      t = cfg.loss == loss_kind::binary_cross_entropy
            ? static_cast<float>(rng.uniform01())
            : static_cast<float>(2 * rng.normal());
  }
  batch_targets y = targets.empty() ? batch_targets{data.labels.data()}
                                    : batch_targets{targets.data()};
  const size_t n = m.layout().total();
  std::vector<float> p(n), g(n);
  m.get_params(p.data());
  m.forward_backward(data.features.to_floats().data(), y, batch);
  m.get_grads(g.data());
  auto loss = [&](const std::vector<float>& params) {
    m.set_params(params.data());
    return m.forward(data.features.to_floats().data(), y, batch).loss_sum
           / batch;
  };
  // Small enough not to cross a max-pool switch point, large enough for
  // float loss differences to stay well above rounding.
  const float eps = 1e-3f;
  int checked = 0, bad = 0;
  for (size_t i = 0; i < n; i += 1 + n / 400) { // at most ~400 parameters
    auto plus = p, minus = p;
    plus[i] += eps;
    minus[i] -= eps;
    double numeric = (loss(plus) - loss(minus)) / (2 * eps);
    double err = std::fabs(numeric - g[i]);
    if (err > 2e-3 + 2e-2 * std::fabs(numeric)) {
      if (bad++ < 5)
        BOOST_ERROR(label << ": d/dp[" << i << "] analytic " << g[i]
                          << " numeric " << numeric);
    }
    ++checked;
  }
  BOOST_TEST_MESSAGE(label << ": " << checked << " of " << n
                           << " parameters checked");
  BOOST_TEST(bad == 0);
}

} // namespace

BOOST_AUTO_TEST_SUITE(gradient_check)

BOOST_AUTO_TEST_CASE(softmax_regression) {
  model_config cfg;
  cfg.type = model_config::kind::softmax;
  cfg.hidden = {};
  check_gradients(cfg, 1, 7, 1, 3, "softmax");
}

BOOST_AUTO_TEST_CASE(mlp_each_activation) {
  for (auto act : {activation::sigmoid, activation::tanh, activation::relu}) {
    model_config cfg;
    cfg.type = model_config::kind::mlp;
    cfg.hidden = {6, 5};
    cfg.act = act;
    check_gradients(cfg, 1, 7, 1, 3, std::string{"mlp "} + to_string(act));
  }
}

// Smooth activations only: ReLU zeros tie inside a pool window, where the
// loss is not differentiable and finite differences disagree with any
// subgradient. ReLU's own backward pass is checked in the MLP above; the
// conv and pool backward passes do not depend on the activation.
BOOST_AUTO_TEST_CASE(cnn_conv_pool_dense) {
  for (auto act : {activation::tanh, activation::sigmoid}) {
    model_config cfg;
    cfg.type = model_config::kind::cnn;
    cfg.conv_channels = {3, 4};
    cfg.kernel_size = 3;
    cfg.hidden = {5};
    cfg.act = act;
    check_gradients(cfg, 8, 4, 2, 3, std::string{"cnn "} + to_string(act));
  }
}

BOOST_AUTO_TEST_CASE(cnn_refuses_samples_it_cannot_pool) {
  auto be = make_cpu_backend(1);
  model_config cfg;
  cfg.type = model_config::kind::cnn;
  auto made = make_model(cfg, 1, 784, 1, 10, *be);
  BOOST_REQUIRE(!made);
  BOOST_TEST(describe(made.error())
             == "/model/type: cnn needs samples whose height and width are "
                "multiples of 4 (two 2x2 pools), found 1x784");
}

// -- layer lists: every layer type, alone and inside a model -----------------

namespace {

layer_spec spec(layer_spec::kind type) {
  layer_spec s;
  s.type = type;
  return s;
}

/// Builds `specs` on `in` and checks each layer alone.
void check_each_layer(const std::vector<layer_spec>& specs, image_shape in,
                      const std::string& label) {
  auto be = make_cpu_backend(1);
  auto built = build_layers(specs, in,
                            [](size_t i) { return std::to_string(i); });
  BOOST_REQUIRE_MESSAGE(built, troupe::test::why(built));
  model_config cfg;
  cfg.init = model_config::init_kind::xavier;
  std::vector<float> params(built->layout.total());
  splitmix64 rng{3};
  for (auto& l : built->layers)
    l->init(params.data(), cfg, rng);
  // Biases and layer norm's beta start at 0 and gamma at 1: move them off,
  // so that their derivatives are checked away from a special point.
  for (auto& v : params)
    v += 0.1f * static_cast<float>(rng.normal());
  image_shape shape = in;
  for (size_t i = 0; i < built->layers.size(); ++i) {
    auto& l = *built->layers[i];
    auto report = check_layer_gradients(l, *be, params.data(), params.size(),
                                        shape, 3, 10 + i);
    BOOST_TEST_MESSAGE(label << " layer " << i << " (" << l.describe()
                             << "): " << report.checked << " checked");
    BOOST_TEST(report.checked > 0);
    BOOST_TEST(report.wrong == 0, label << " layer " << i << " ("
                                        << l.describe() << "): " << report.wrong
                                        << " wrong, first " << report.first);
    shape = l.output_shape();
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(every_layer_type_alone) {
  using lk = layer_spec::kind;
  auto conv = [](int filters, int kernel, int stride, int padding, bool same,
                 layer_activation act) {
    layer_spec s = spec(lk::conv2d);
    s.filters = filters;
    s.kernel = kernel;
    s.stride = stride;
    s.padding = padding;
    s.same_padding = same;
    s.act = act;
    return s;
  };
  auto pool = [](lk type, int size, int stride) {
    layer_spec s = spec(type);
    s.size = size;
    s.stride = stride;
    return s;
  };
  auto act = [](layer_activation a) {
    layer_spec s = spec(lk::activation);
    s.act = a;
    return s;
  };
  layer_spec drop = spec(lk::dropout);
  drop.rate = 0.3;
  layer_spec dense = spec(lk::dense);
  dense.units = 5;
  dense.act = layer_activation::gelu; // dense, then its own gelu layer
  check_each_layer(
    {conv(4, 3, 2, 1, true, layer_activation::tanh), pool(lk::avgpool, 2, 1),
     conv(3, 2, 1, 0, false, layer_activation::sigmoid), spec(lk::layernorm),
     act(layer_activation::gelu), pool(lk::maxpool, 2, 1), drop,
     spec(lk::flatten), spec(lk::layernorm), dense,
     act(layer_activation::softmax), act(layer_activation::tanh),
     act(layer_activation::sigmoid)},
    {9, 8, 2}, "image layers");
}

// The same layers inside one model, against its mean softmax cross-entropy
// (no dropout: the model's loss is an evaluation pass).
BOOST_AUTO_TEST_CASE(layer_list_model) {
  using lk = layer_spec::kind;
  model_config cfg;
  cfg.type = model_config::kind::layers;
  layer_spec conv = spec(lk::conv2d);
  conv.filters = 3;
  conv.kernel = 3;
  conv.stride = 2;
  conv.padding = 1;
  conv.act = layer_activation::tanh;
  layer_spec avg = spec(lk::avgpool);
  avg.stride = 1;
  layer_spec gelu = spec(lk::activation);
  gelu.act = layer_activation::gelu;
  layer_spec dense = spec(lk::dense);
  dense.units = 3;
  cfg.layers = {conv, spec(lk::layernorm), avg, gelu, spec(lk::flatten), dense};
  check_gradients(cfg, 8, 6, 2, 3, "layers");
}

// The losses on float targets, through a model: 3 outputs of soft labels
// (binary cross-entropy) and of reals (squared error).
BOOST_AUTO_TEST_CASE(float_target_losses) {
  using lk = layer_spec::kind;
  model_config cfg;
  cfg.type = model_config::kind::layers;
  layer_spec hidden = spec(lk::dense);
  hidden.units = 5;
  hidden.act = layer_activation::tanh;
  layer_spec out = spec(lk::dense);
  out.units = 3;
  cfg.layers = {spec(lk::flatten), hidden, out};
  cfg.loss = loss_kind::binary_cross_entropy;
  check_gradients(cfg, 2, 3, 1, 3, "binary_cross_entropy");
  cfg.loss = loss_kind::mean_squared_error;
  check_gradients(cfg, 2, 3, 1, 3, "mean_squared_error");
}

// What the losses say on values worked out by hand.
BOOST_AUTO_TEST_CASE(float_target_losses_on_known_values) {
  // Row 0: logits 0 and 2 against 1 and 1: (log 2 + log(1 + e^-2)) / 2,
  // one output on the wrong side. Row 1: -3 and 4 against 0 and 1: both
  // right.
  const float z[] = {0.f, 2.f, -3.f, 4.f};
  const float t[] = {1.f, 1.f, 0.f, 1.f};
  float g[4];
  auto bce = binary_cross_entropy(z, t, 2, 2, g, 0.5f);
  double row0 = (std::log(2.0) + std::log1p(std::exp(-2.0))) / 2;
  double row1 = (std::log1p(std::exp(-3.0)) + std::log1p(std::exp(-4.0))) / 2;
  BOOST_TEST(bce.loss_sum == row0 + row1, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(bce.correct == 1);
  // scale 1/2 (the batch), 1/2 (the outputs): (sigmoid(0) - 1) / 4.
  BOOST_TEST(g[0] == -0.125f, boost::test_tools::tolerance(1e-6f));
  // A logit far out does not overflow.
  const float far[] = {-200.f};
  const float one[] = {1.f};
  BOOST_TEST(binary_cross_entropy(far, one, 1, 1, nullptr, 1.f).loss_sum
               == 200.0,
             boost::test_tools::tolerance(1e-9));

  const float y[] = {1.f, 3.f, 0.f, -2.f};
  const float want[] = {0.f, 1.f, 0.f, 0.f};
  auto mse = mean_squared_error(y, want, 2, 2, g, 1.f);
  BOOST_TEST(mse.loss_sum == (1 + 4) / 2.0 + (0 + 4) / 2.0);
  BOOST_TEST(mse.abs_err_sum == (1 + 2) / 2.0 + (0 + 2) / 2.0);
  BOOST_TEST(g[1] == 2.f); // 2 * scale / outputs * error = 2 / 2 * 2
}

// A batch must carry what the loss reads.
BOOST_AUTO_TEST_CASE(a_batch_of_the_wrong_kind_is_refused) {
  using lk = layer_spec::kind;
  auto be = make_cpu_backend(1);
  model_config cfg;
  cfg.type = model_config::kind::layers;
  layer_spec out = spec(lk::dense);
  out.units = 2;
  cfg.layers = {spec(lk::flatten), out};
  cfg.loss = loss_kind::mean_squared_error;
  auto made = make_model(cfg, 1, 4, 1, 2, *be);
  BOOST_REQUIRE(made);
  std::vector<float> x(4, 0.5f);
  std::vector<int32_t> labels{1};
  BOOST_CHECK_THROW((*made)->forward(x.data(), labels.data(), 1),
                    std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
