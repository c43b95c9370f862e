// make_model: a config's model, built from its layer list (a shorthand's
// list for softmax, mlp, cnn and click).
#include "models/layer_list.hpp"
#include "models/model.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// click: the MLP's inputs beyond the sample's numeric fields, one pooled
/// row per categorical field.
int pooled_inputs(const model_config& cfg) {
  return cfg.type == model_config::kind::click
           ? cfg.table_fields * cfg.table.dim
           : 0;
}

/// A shorthand's summary as troupe has always logged and checkpointed it,
/// e.g. "mlp 784-256-128-10 relu", "cnn 28x28x1 conv5x5-32+pool
/// conv5x5-64+pool dense 3136-10 relu".
std::string shorthand_summary(const model_config& cfg, image_shape in,
                              int classes) {
  std::string summary = to_string(cfg.type);
  int flat = static_cast<int>(in.size());
  if (cfg.type == model_config::kind::cnn) {
    summary += " " + std::to_string(in.height) + "x" + std::to_string(in.width)
               + "x" + std::to_string(in.channels);
    int h = in.height, w = in.width;
    for (int filters : cfg.conv_channels) {
      summary += " conv" + std::to_string(cfg.kernel_size) + "x"
                 + std::to_string(cfg.kernel_size) + "-"
                 + std::to_string(filters) + "+pool";
      h /= 2;
      w /= 2;
      flat = h * w * filters;
    }
    summary += " dense";
  }
  summary += " " + std::to_string(flat);
  for (int units : cfg.hidden)
    summary += "-" + std::to_string(units);
  summary += "-" + std::to_string(classes);
  if (!cfg.hidden.empty() || cfg.type == model_config::kind::cnn)
    summary += std::string{" "} + to_string(cfg.act);
  return summary;
}

} // namespace

caf::expected<std::unique_ptr<model>> make_model(const model_config& cfg,
                                                 int height, int width,
                                                 int channels, int classes,
                                                 compute_backend& be) {
  using mk = model_config::kind;
  if (cfg.type == mk::external)
    return make_error(errc::invalid_config,
                      "/model/type: an external model is computed by its "
                      "own step function (the Python module's workers), not "
                      "by troupe: train it on a cluster (troupe-node) whose "
                      "workers run that function");
  if (cfg.type == mk::cnn
      && (height < 4 || width < 4 || height % 4 != 0 || width % 4 != 0))
    return make_error(errc::invalid_config,
                      "/model/type: cnn needs samples whose height and "
                      "width are multiples of 4 (two 2x2 pools), found "
                        + std::to_string(height) + "x" + std::to_string(width));
  // click: the pooled rows join the numeric fields as one flat input.
  image_shape in{height, width, channels};
  if (cfg.type == mk::click)
    in = {1, 1, static_cast<int>(in.size()) + pooled_inputs(cfg)};
  const bool listed = cfg.type == mk::layers;
  // A table's rows (1 x F x 1: CSV files and (N, F) arrays) are F flat
  // features, as a dense layer takes them without a flatten.
  if (listed && in.height == 1 && in.channels == 1)
    in = {1, 1, in.width};
  const auto specs = listed ? cfg.layers : shorthand_layers(cfg, classes);
  auto where = [&](size_t i) {
    return listed ? "/model/layers/" + std::to_string(i)
                  : "/model: " + std::string{to_string(cfg.type)} + "'s layer "
                      + std::to_string(i);
  };
  auto built = build_layers(specs, in, where);
  if (!built)
    return built.error();
  if (auto err = check_loss_fits(cfg.loss, specs.back(), built->output, classes,
                                 where(specs.size() - 1)))
    return err;
  for (size_t i = 0; i < built->layers.size(); ++i)
    if (!built->layers[i]->supports(be))
      return make_error(errc::invalid_config,
                        where(built->spec_index[i]) + " ("
                          + built->layers[i]->describe()
                          + "): runs on the CPU backend only, not on "
                          + be.describe() + ": set \"device\": \"cpu\"");
  std::string summary = listed ? "layers " + in.to_string() + ": "
                                   + built->description
                               : shorthand_summary(cfg, in, classes);
  return std::make_unique<model>(be, cfg, std::move(summary),
                                 std::move(built->layout),
                                 std::move(built->layers), in.size(), classes);
}

} // namespace troupe
