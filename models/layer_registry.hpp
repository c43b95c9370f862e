// Layers of your own: a program registers a layer type by name before it
// reads a config, and configs name it in their layer lists like a
// built-in type, with options of its own:
//
//   troupe::register_layer("residual", [](troupe::layer_args& a)
//       -> caf::expected<std::unique_ptr<troupe::layer>> {
//     if (!a.input().flat())
//       return a.fail("needs flat input, found " + a.input().to_string());
//     auto act = a.string("activation", "relu");
//     return std::make_unique<residual_layer>(a.layout(), a.name(),
//                                             a.input().channels);
//   });
//
//   "layers": [..., { "type": "residual", "activation": "relu" }, ...]
//
// The layer implements models/layer.hpp; models/gradient_check.hpp checks
// its backward pass. docs/models.md#a-layer-of-your-own has the whole
// story and examples/custom_layer a complete program.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "caf/expected.hpp"
#include "models/layer.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// What a layer factory is given: the layer's input shape, the model's
/// parameter layout to add its tensors to, a name for them, and the
/// layer's options from the config, read with defaults and ranges. An
/// option the factory did not read is refused after it returns, and every
/// error names the layer's JSON pointer.
class layer_args {
public:
  /// `pointer`: the layer's JSON pointer, e.g. "/model/layers/3".
  layer_args(image_shape input, param_layout& layout, std::string type,
             std::string name, std::string pointer,
             const std::string& options_json);
  ~layer_args();

  image_shape input() const { return input_; }
  param_layout& layout() { return layout_; }
  /// The prefix of this layer's tensor names: the type and its count so
  /// far, e.g. "residual0" (its tensors "residual0/w", ...).
  const std::string& name() const { return name_; }

  int64_t integer(const std::string& key, int64_t fallback, int64_t min,
                  int64_t max);
  double number(const std::string& key, double fallback, double min,
                double max);
  std::string string(const std::string& key, const std::string& fallback);
  bool boolean(const std::string& key, bool fallback);

  /// errc::invalid_config: "<the layer's pointer> (<type>): <reason>".
  caf::error fail(const std::string& reason) const;

  /// The first option error met (a wrong type, out of range), or none;
  /// then every option not read. Called by the model builder.
  caf::error finish() const;

private:
  struct options;
  image_shape input_;
  param_layout& layout_;
  std::string type_, name_, pointer_;
  std::unique_ptr<options> options_;
};

using layer_factory =
  std::function<caf::expected<std::unique_ptr<layer>>(layer_args&)>;

/// Makes `type` a layer type configs can name. errc::invalid_argument when
/// it is a built-in type or registered already. Register before reading
/// the configs that use it (a config naming an unknown type is refused).
caf::error register_layer(const std::string& type, layer_factory make);

/// The factory of a registered type; null when there is none.
const layer_factory* find_layer_factory(const std::string& type);

} // namespace troupe
