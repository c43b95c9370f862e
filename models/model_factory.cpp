// make_model: the architectures a config can name.
#include <numeric>

#include "models/conv_layers.hpp"
#include "models/dense_layer.hpp"
#include "models/model.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// At most 2^30 parameters (4 GiB of floats, and as much again per
/// optimizer slot and per worker's gradient).
constexpr long double max_params = 1 << 30;

/// click: the MLP's inputs beyond the sample's numeric fields, one pooled
/// row per categorical field.
int pooled_inputs(const model_config& cfg) {
  return cfg.type == model_config::kind::click
           ? cfg.table_fields * cfg.table.dim
           : 0;
}

/// The parameter count of `cfg` on samples of the given shape, or an
/// error when it exceeds max_params: counted (in long double, which
/// cannot overflow here) before any layer allocates.
caf::error check_size(const model_config& cfg, int height, int width,
                      int channels, int classes) {
  long double params = 0, in = static_cast<long double>(height) * width
                                   * channels
                               + static_cast<long double>(pooled_inputs(cfg));
  if (cfg.type == model_config::kind::cnn) {
    long double c = channels, area = static_cast<long double>(height) * width;
    for (int out : cfg.conv_channels) {
      params += static_cast<long double>(cfg.kernel_size) * cfg.kernel_size
                  * c * out
                + out;
      c = out;
      area /= 4;
    }
    in = area * c;
  }
  for (int out : cfg.hidden) {
    params += (in + 1) * out;
    in = out;
  }
  params += (in + 1) * classes;
  if (params > max_params)
    return make_error(errc::invalid_config,
                      "/model: " + std::to_string(static_cast<double>(params))
                        + " parameters on " + std::to_string(height) + "x"
                        + std::to_string(width) + "x"
                        + std::to_string(channels)
                        + " samples (at most 2^30)");
  return caf::none;
}

} // namespace

caf::expected<std::unique_ptr<model>>
make_model(const model_config& cfg, int height, int width, int channels,
           int classes, compute_backend& be) {
  if (cfg.type == model_config::kind::external)
    return make_error(errc::invalid_config,
                      "/model/type: an external model is computed by its "
                      "own step function (the Python module's workers), not "
                      "by troupe: train it on a cluster (troupe-node) whose "
                      "workers run that function");
  if (auto err = check_size(cfg, height, width, channels, classes))
    return err;
  param_layout layout;
  std::vector<std::unique_ptr<layer>> layers;
  const int input = height * width * channels + pooled_inputs(cfg);
  std::string summary = to_string(cfg.type);
  auto add_dense_stack = [&](int in, const std::string& prefix) {
    std::string sizes = std::to_string(in);
    int i = 0;
    for (int width_out : cfg.hidden) {
      layers.push_back(std::make_unique<dense_layer>(
        layout, prefix + std::to_string(i++), in, width_out, cfg.act));
      sizes += "-" + std::to_string(width_out);
      in = width_out;
    }
    layers.push_back(std::make_unique<dense_layer>(
      layout, prefix + std::to_string(i), in, classes, activation::identity));
    return sizes + "-" + std::to_string(classes);
  };
  switch (cfg.type) {
    case model_config::kind::softmax:
    case model_config::kind::mlp:
    case model_config::kind::click: // the dense part; rows are inputs
      summary += " " + add_dense_stack(input, "dense");
      if (!cfg.hidden.empty())
        summary += std::string{" "} + to_string(cfg.act);
      break;
    case model_config::kind::external: // refused above
      break;
    case model_config::kind::cnn: {
      if (height < 4 || width < 4 || height % 4 != 0 || width % 4 != 0)
        return make_error(errc::invalid_config,
                          "/model/type: cnn needs samples whose height and "
                          "width are multiples of 4 (two 2x2 pools), found "
                            + std::to_string(height) + "x"
                            + std::to_string(width));
      image_shape geometry{height, width, channels};
      summary += " " + std::to_string(height) + "x" + std::to_string(width)
                 + "x" + std::to_string(channels);
      for (size_t block = 0; block < cfg.conv_channels.size(); ++block) {
        auto conv = std::make_unique<conv2d_layer>(
          layout, "conv" + std::to_string(block), geometry,
          cfg.conv_channels[block], cfg.kernel_size, cfg.act);
        geometry = conv->output_shape();
        layers.push_back(std::move(conv));
        auto pool = std::make_unique<maxpool_layer>(geometry, 2);
        geometry = pool->output_shape();
        layers.push_back(std::move(pool));
        summary += " conv" + std::to_string(cfg.kernel_size) + "x"
                   + std::to_string(cfg.kernel_size) + "-"
                   + std::to_string(cfg.conv_channels[block]) + "+pool";
      }
      summary += " dense "
                 + add_dense_stack(static_cast<int>(geometry.size()), "dense");
      summary += std::string{" "} + to_string(cfg.act);
      break;
    }
  }
  return std::make_unique<model>(be, cfg, std::move(summary), std::move(layout),
                                 std::move(layers),
                                 static_cast<size_t>(input), classes);
}

} // namespace troupe
