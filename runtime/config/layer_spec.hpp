// One entry of a model's layer list ("model": {"layers": [...]}), as the
// config reader checked it: the type and its options, with their defaults
// filled in. What a layer's shapes allow is checked when the model is built
// (models/layer_list.hpp), where the input's shape is known.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace troupe {

/// A layer's nonlinearity, fused into dense and conv2d or a layer of its
/// own. identity, relu, tanh and sigmoid run on every backend fused into
/// dense and conv2d; gelu and softmax are layers of their own.
enum class layer_activation { identity, relu, tanh, sigmoid, gelu, softmax };

/// "identity", "relu", "tanh", "sigmoid", "gelu", "softmax".
const char* to_string(layer_activation a);

struct layer_spec {
  enum class kind {
    dense,      ///< units, activation
    conv2d,     ///< filters, kernel, stride, padding, activation
    maxpool,    ///< size, stride
    avgpool,    ///< size, stride
    flatten,    ///< (image -> flat features; no computation)
    dropout,    ///< rate
    layernorm,  ///< epsilon
    activation, ///< activation
    custom,     ///< a type the program registered (models/layer_registry.hpp)
  };
  kind type = kind::dense;
  int units = 0;   ///< dense: output features
  int filters = 0; ///< conv2d: output channels
  int kernel = 3;  ///< conv2d: square kernel
  /// conv2d: the step between windows (default 1); pools: default = size.
  int stride = 1;
  /// conv2d: zeros added on every side; same_padding = kernel / 2 (odd
  /// kernels), which keeps the size at stride 1 (PyTorch's padding=k//2).
  int padding = 0;
  bool same_padding = true;
  int size = 2;          ///< pools: the square window
  double rate = 0.5;     ///< dropout: the fraction dropped in training
  double epsilon = 1e-5; ///< layernorm
  layer_activation act = layer_activation::identity;
  /// custom: the registered type's name, and the layer's object without
  /// its "type" as JSON text, which the type's factory reads.
  std::string custom_type;
  std::string options;
};

/// "dense", "conv2d", "maxpool", ...: the "type" a config writes.
const char* to_string(layer_spec::kind k);

/// The spec in one line with every option, e.g. "conv2d filters=32 kernel=3
/// stride=2 padding=same activation=relu": the training identity's entry
/// and what an error about the layer quotes.
std::string to_string(const layer_spec& s);

/// The spec to_string(spec) wrote (a checkpoint's record of its model);
/// nullopt for text of another form.
std::optional<layer_spec> parse_layer_spec(const std::string& text);

/// Layer types a program adds to the built-in ones (the names only: their
/// factories are in models/layer_registry.hpp, which calls this). Returns
/// false when `type` is built in or already registered.
bool add_layer_type_name(const std::string& type);
/// Whether `type` was added.
bool layer_type_registered(const std::string& type);

/// The loss a layer-list model is trained with, on its last layer's output.
enum class loss_kind {
  softmax_cross_entropy, ///< integer class labels; the last layer's logits
  binary_cross_entropy,  ///< targets in [0, 1], one per output; its logits
  mean_squared_error,    ///< float targets, one per output; its values
};

const char* to_string(loss_kind k);

/// Whether `k` fits float values (a regression), which are scored by R^2
/// rather than accuracy.
inline bool is_regression(loss_kind k) {
  return k == loss_kind::mean_squared_error;
}

/// The score a run with loss `k` is judged by: "r2" or "accuracy", as
/// progress lines, metrics files and the plot name it.
inline const char* score_name(loss_kind k) {
  return is_regression(k) ? "r2" : "accuracy";
}

} // namespace troupe
