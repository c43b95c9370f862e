#include "tests/fuzz/layer_list_inputs.hpp"

#include <cmath>
#include <vector>

#include "models/layer_list.hpp"
#include "models/model.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/config/config.hpp"

namespace troupe::fuzz {

namespace {

constexpr int height = 12, width = 10, channels = 3, classes = 5;

/// An error is one line that says where: the config's origin and a
/// pointer under /model.
bool names_the_model(const caf::error& err, const std::string& prefix) {
  auto text = describe(err);
  return text.rfind(prefix, 0) == 0 && text.find('\n') == std::string::npos;
}

} // namespace

std::string read_layer_list(const uint8_t* data, size_t size) {
  std::string text = R"({"model": {"layers": )";
  text.append(reinterpret_cast<const char*>(data), size);
  text += R"(}, "data": {"format": "synthetic"}})";
  auto cfg = parse_run_config(text, "fuzz.json");
  if (!cfg)
    return names_the_model(cfg.error(), "fuzz.json: ")
             ? ""
             : "a config error that is not one line naming the file: "
                 + describe(cfg.error());
  for (auto& spec : cfg->model.layers) {
    auto back = parse_layer_spec(to_string(spec));
    if (!back || to_string(*back) != to_string(spec))
      return "a layer whose recorded form does not read back: "
             + to_string(spec);
  }
  auto built = build_layers(cfg->model.layers, {height, width, channels},
                            [](size_t i) {
                              return "/model/layers/" + std::to_string(i);
                            });
  if (!built)
    return names_the_model(built.error(), "/model/layers/")
             ? ""
             : "a build error that does not name a layer: "
                 + describe(built.error());
  // Each layer's input is the last one's output, and sizes match shapes.
  size_t activations = 0;
  for (auto& l : built->layers) {
    if (l->output_size() != l->output_shape().size() || l->output_size() == 0)
      return "a layer whose output_size() is not its shape's: " + l->describe();
    activations += l->output_size();
  }
  if (built->layout.total() > (size_t{1} << 30))
    return "more than 2^30 parameters built";
  if (built->layout.total() >= (size_t{1} << 20)
      || activations >= (size_t{1} << 20))
    return "";
  auto be = make_cpu_backend(1);
  auto m = make_model(cfg->model, height, width, channels, classes, *be);
  if (!m)
    return names_the_model(m.error(), "/model/layers/")
             ? ""
             : "a model error that does not name a layer: "
                 + describe(m.error());
  std::vector<float> x(2 * height * width * channels);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  const int32_t labels[2] = {0, classes - 1};
  auto trained = (*m)->forward_backward(x.data(), labels, 2);
  auto evaluated = (*m)->forward(x.data(), labels, 2);
  if (!std::isfinite(trained.loss_sum) || !std::isfinite(evaluated.loss_sum))
    return "a loss that is not finite on small inputs";
  return "";
}

} // namespace troupe::fuzz
