// From a layer list (runtime/config/layer_spec.hpp) to the layers of a
// model: every model troupe builds goes through here, the shorthands
// (softmax, mlp, cnn, click) as the lists they stand for.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "models/layer.hpp"
#include "runtime/config/config.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

/// The list a shorthand type stands for, ending in `classes` logits:
/// - softmax, mlp, click's dense part: flatten, a dense layer per `hidden`
///   entry with `activation`, a dense layer of `classes`;
/// - cnn: per `conv_channels` entry a conv2d (kernel_size, stride 1, same
///   padding, `activation`) and a 2x2 maxpool, then flatten and the dense
///   layers as above.
std::vector<layer_spec> shorthand_layers(const model_config& cfg, int classes);

struct built_layers {
  param_layout layout;
  std::vector<std::unique_ptr<layer>> layers;
  /// Per layer, the index of the spec it was built from (a nonlinearity
  /// dense or conv2d do not fuse is a layer of its own after theirs).
  std::vector<size_t> spec_index;
  image_shape output{1, 1, 0};
  /// The layers' describe() strings, ", "-separated.
  std::string description;
};

/// Builds `specs` for samples of shape `in`, naming parameters per type
/// in order (dense0/w, dense0/b, conv0/w, ..., layernorm0/gamma). Each
/// layer's input shape is checked; an error is errc::invalid_config with
/// "<where(i)>: <reason>", naming both shapes where a shape is wrong.
/// Builds no backend buffers: the model allocates them.
caf::expected<built_layers>
build_layers(const std::vector<layer_spec>& specs, image_shape in,
             const std::function<std::string(size_t)>& where);

/// Whether `out`, the last layer's shape, fits `loss` on `classes`
/// classes; an error names the last layer (where) and the reason.
caf::error check_loss_fits(loss_kind loss, const layer_spec& last,
                           image_shape out, int classes,
                           const std::string& where);

} // namespace troupe
