// Every layer's backward pass against central finite differences of the
// model's mean loss, through whole small models (so each layer's dx is
// checked too, by the gradients of the layers before it).
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "models/model.hpp"
#include "runtime/compute/cpu_backend.hpp"
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
  const size_t n = m.layout().total();
  std::vector<float> p(n), g(n);
  m.get_params(p.data());
  m.forward_backward(data.images.data(), data.labels.data(), batch);
  m.get_grads(g.data());
  auto loss = [&](const std::vector<float>& params) {
    m.set_params(params.data());
    return m.forward(data.images.data(), data.labels.data(), batch).loss_sum
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

BOOST_AUTO_TEST_SUITE_END()
