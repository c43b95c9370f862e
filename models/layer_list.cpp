#include "models/layer_list.hpp"

#include <map>

#include "models/activation_layer.hpp"
#include "models/conv_layers.hpp"
#include "models/dense_layer.hpp"
#include "models/dropout_layer.hpp"
#include "models/layer_registry.hpp"
#include "models/layernorm_layer.hpp"
#include "models/pooling_layers.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// At most 2^30 parameters (4 GiB of floats, and as much again per
/// optimizer slot and per worker's gradient), and 2^28 activations per
/// sample out of any layer.
constexpr size_t max_params = size_t{1} << 30;
constexpr size_t max_activations = size_t{1} << 28;

layer_spec dense(int units, layer_activation act) {
  layer_spec s;
  s.type = layer_spec::kind::dense;
  s.units = units;
  s.act = act;
  return s;
}

layer_activation of(activation a) {
  switch (a) {
    case activation::identity: return layer_activation::identity;
    case activation::sigmoid: return layer_activation::sigmoid;
    case activation::tanh: return layer_activation::tanh;
    case activation::relu: return layer_activation::relu;
  }
  return layer_activation::identity;
}

/// The backend's fused activation for `a`, when it has one.
bool fused(layer_activation a, activation* out) {
  switch (a) {
    case layer_activation::identity: *out = activation::identity; return true;
    case layer_activation::relu: *out = activation::relu; return true;
    case layer_activation::tanh: *out = activation::tanh; return true;
    case layer_activation::sigmoid: *out = activation::sigmoid; return true;
    case layer_activation::gelu:
    case layer_activation::softmax: return false;
  }
  return false;
}

} // namespace

std::vector<layer_spec> shorthand_layers(const model_config& cfg, int classes) {
  std::vector<layer_spec> out;
  if (cfg.type == model_config::kind::cnn)
    for (int filters : cfg.conv_channels) {
      layer_spec conv;
      conv.type = layer_spec::kind::conv2d;
      conv.filters = filters;
      conv.kernel = cfg.kernel_size;
      conv.padding = cfg.kernel_size / 2;
      conv.act = of(cfg.act);
      out.push_back(conv);
      layer_spec pool;
      pool.type = layer_spec::kind::maxpool;
      pool.size = 2;
      pool.stride = 2;
      out.push_back(pool);
    }
  layer_spec flatten;
  flatten.type = layer_spec::kind::flatten;
  out.push_back(flatten);
  for (int units : cfg.hidden)
    out.push_back(dense(units, of(cfg.act)));
  out.push_back(dense(classes, layer_activation::identity));
  return out;
}

caf::expected<built_layers>
build_layers(const std::vector<layer_spec>& specs, image_shape in,
             const std::function<std::string(size_t)>& where) {
  using lk = layer_spec::kind;
  built_layers b;
  std::map<std::string, int> count; // parameter names per type
  auto name = [&](const std::string& prefix) {
    return prefix + std::to_string(count[prefix]++);
  };
  image_shape current = in;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& s = specs[i];
    const std::string type = s.type == lk::custom ? s.custom_type
                                                  : to_string(s.type);
    auto fail = [&](const std::string& reason) {
      return make_error(errc::invalid_config,
                        where(i) + " (" + type + "): " + reason);
    };
    auto add = [&](std::unique_ptr<layer> l) {
      current = l->output_shape();
      b.description += (b.description.empty() ? "" : ", ") + l->describe();
      b.layers.push_back(std::move(l));
      b.spec_index.push_back(i);
    };
    // A nonlinearity the backend does not fuse follows as its own layer.
    activation act = activation::identity;
    const bool fuses = fused(s.act, &act);
    switch (s.type) {
      case lk::dense:
        if (!current.flat())
          return fail("needs flat input, found " + current.to_string()
                      + " values per sample: put a flatten layer before it");
        add(std::make_unique<dense_layer>(b.layout, name("dense"),
                                          current.channels, s.units, act));
        break;
      case lk::conv2d: {
        const int pad = s.same_padding ? s.kernel / 2 : s.padding;
        if (current.height + 2 * pad < s.kernel
            || current.width + 2 * pad < s.kernel)
          return fail("a " + std::to_string(s.kernel) + "x"
                      + std::to_string(s.kernel)
                      + " kernel is larger than "
                        "its "
                      + current.to_string() + " input with "
                      + std::to_string(pad) + " zeros of padding");
        add(std::make_unique<conv2d_layer>(b.layout, name("conv"), current,
                                           s.filters, s.kernel, s.stride, pad,
                                           act));
        break;
      }
      case lk::maxpool:
      case lk::avgpool:
        if (current.height < s.size || current.width < s.size)
          return fail("a " + std::to_string(s.size) + "x"
                      + std::to_string(s.size) + " pool is larger than its "
                      + current.to_string() + " input");
        if (s.type == lk::maxpool)
          add(std::make_unique<maxpool_layer>(current, s.size, s.stride));
        else
          add(std::make_unique<avgpool_layer>(current, s.size, s.stride));
        break;
      case lk::flatten: // NHWC is already flat in memory
        if (current.size() > max_activations)
          return fail("gives " + current.to_string()
                      + " values per sample (from 1 to 2^28)");
        current = {1, 1, static_cast<int>(current.size())};
        break;
      case lk::dropout:
        add(std::make_unique<dropout_layer>(current, s.rate));
        break;
      case lk::layernorm:
        add(std::make_unique<layernorm_layer>(b.layout, name("layernorm"),
                                              current, s.epsilon));
        break;
      case lk::activation:
        add(std::make_unique<activation_layer>(current, s.act));
        break;
      case lk::custom: {
        const auto* make = find_layer_factory(s.custom_type);
        if (make == nullptr)
          return fail("no layer type of that name is registered");
        layer_args args{current,  b.layout, s.custom_type, name(s.custom_type),
                        where(i), s.options};
        auto made = (*make)(args);
        if (auto err = args.finish())
          return err;
        if (!made)
          return made.error();
        if (*made == nullptr)
          return fail("its factory made no layer");
        add(std::move(*made));
        break;
      }
    }
    if (!fuses && s.type != lk::activation)
      add(std::make_unique<activation_layer>(current, s.act));
    if (current.size() == 0 || current.size() > max_activations)
      return fail("gives " + current.to_string()
                  + " values per sample (from 1 to 2^28)");
    if (b.layout.total() > max_params)
      return fail("brings the model to " + std::to_string(b.layout.total())
                  + " parameters (at most 2^30)");
  }
  if (b.layout.total() == 0)
    return make_error(errc::invalid_config,
                      where(specs.size() - 1)
                        + ": the model has no parameters to train: add a "
                          "dense, conv2d or layernorm layer");
  b.output = current;
  return b;
}

caf::error check_loss_fits(loss_kind loss, const layer_spec& last,
                           image_shape out, int classes,
                           const std::string& where) {
  switch (loss) {
    case loss_kind::softmax_cross_entropy:
      if (last.act == layer_activation::softmax
          && (last.type == layer_spec::kind::dense
              || last.type == layer_spec::kind::conv2d
              || last.type == layer_spec::kind::activation))
        return make_error(errc::invalid_config,
                          where
                            + ": softmax_cross_entropy takes the last "
                              "layer's logits and applies the softmax "
                              "itself: drop the softmax");
      if (!out.flat() || out.channels != classes)
        return make_error(errc::invalid_config,
                          where + ": the last layer gives " + out.to_string()
                            + " values per sample; softmax_cross_entropy "
                              "needs "
                            + std::to_string(classes)
                            + ", one logit per class of the data: end with "
                              "a dense layer of "
                            + std::to_string(classes) + " units");
      break;
    case loss_kind::binary_cross_entropy:
      if (last.act == layer_activation::sigmoid
          || last.act == layer_activation::softmax)
        return make_error(errc::invalid_config,
                          where
                            + ": binary_cross_entropy takes the last "
                              "layer's logits and applies the sigmoid "
                              "itself: drop the "
                            + to_string(last.act));
      [[fallthrough]];
    case loss_kind::mean_squared_error:
      if (!out.flat() || out.channels != classes)
        return make_error(
          errc::invalid_config,
          where + ": the last layer gives " + out.to_string()
            + " values per sample; the data has " + std::to_string(classes)
            + " target" + (classes == 1 ? "" : "s")
            + " per sample: end with a dense layer of "
            + std::to_string(classes) + " unit" + (classes == 1 ? "" : "s"));
      break;
  }
  return caf::none;
}

} // namespace troupe
