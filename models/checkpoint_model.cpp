#include "models/checkpoint_model.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "runtime/base/errc.hpp"
#include "runtime/config/run_identity.hpp"

namespace troupe {

namespace {

/// The model of `mc` for samples of height x width x channels, checked
/// against the checkpoint's tensors and loaded with its values: the end
/// of both ways of reading a checkpoint's architecture.
caf::expected<std::unique_ptr<model>>
build_and_load(const checkpoint& ckpt, const std::string& path,
               const model_config& mc, int classes, int height, int width,
               int channels, compute_backend& be) {
  auto made = make_model(mc, height, width, channels, classes, be);
  if (!made)
    return made.error();
  if (auto err = check_layout(ckpt, (*made)->layout(), path))
    return make_error(
      errc::layout_mismatch,
      describe(err) + " (samples of " + std::to_string(height) + "x"
        + std::to_string(width) + "x" + std::to_string(channels)
        + " do not fit the model it holds, " + to_string(mc.type) + ")");
  (*made)->set_params(ckpt.params.data());
  return made;
}

/// A layer-list model: its specs from "/model/layers/<i>", its loss from
/// "/model/loss", its class (or target) count from the last dense layer's
/// units.
caf::expected<std::unique_ptr<model>>
from_layer_list(const checkpoint& ckpt, const std::string& path,
                const identity_map& id, int height, int width, int channels,
                compute_backend& be) {
  auto bad = [&](const std::string& what) {
    return make_error(errc::bad_format, path + ": " + what);
  };
  model_config mc;
  mc.type = model_config::kind::layers;
  if (auto it = id.find("/model/loss"); it != id.end()) {
    bool known = false;
    for (auto k :
         {loss_kind::softmax_cross_entropy, loss_kind::binary_cross_entropy,
          loss_kind::mean_squared_error})
      if (it->second == to_string(k)) {
        mc.loss = k;
        known = true;
      }
    if (!known)
      return bad("unknown loss \"" + it->second + "\" in its config");
  }
  for (size_t i = 0;; ++i) {
    auto it = id.find("/model/layers/" + std::to_string(i));
    if (it == id.end())
      break;
    auto spec = parse_layer_spec(it->second);
    if (!spec)
      return bad("unreadable layer " + std::to_string(i)
                 + " in its config: " + it->second);
    if (spec->type == layer_spec::kind::custom
        && !layer_type_registered(spec->custom_type))
      return bad("layer " + std::to_string(i) + " is of type \""
                 + spec->custom_type
                 + "\", which a program of its own registered: rebuild the "
                   "model there");
    mc.layers.push_back(*spec);
  }
  int classes = 0;
  for (auto it = mc.layers.rbegin(); it != mc.layers.rend() && classes == 0;
       ++it)
    if (it->type == layer_spec::kind::dense)
      classes = it->units;
  // Float targets may be one per sample; classes are two or more.
  const int least = mc.loss == loss_kind::softmax_cross_entropy ? 2 : 1;
  if (mc.layers.empty() || classes < least)
    return bad("no layer list ending in a dense layer of "
               + std::to_string(least) + " or more units in its config");
  return build_and_load(ckpt, path, mc, classes, height, width, channels, be);
}

} // namespace

caf::expected<std::unique_ptr<model>>
model_from_checkpoint(const checkpoint& ckpt, const std::string& path,
                      int height, int width, int channels,
                      compute_backend& be) {
  auto bad = [&](const std::string& what) {
    return make_error(errc::bad_format, path + ": " + what);
  };
  auto meta = ckpt.metadata.find("config");
  if (meta == ckpt.metadata.end())
    return bad("the checkpoint records no model config (it predates "
               "checkpoints that do); score it with troupe-train "
               "--evaluate and its run config");
  auto id = parse_identity(meta->second);
  auto get = [&](const std::string& key) {
    auto it = id.find(key);
    return it == id.end() ? std::string{} : it->second;
  };
  model_config mc;
  auto type = get("/model/type");
  if (type == "layers")
    return from_layer_list(ckpt, path, id, height, width, channels, be);
  if (type == "softmax")
    mc.type = model_config::kind::softmax;
  else if (type == "mlp")
    mc.type = model_config::kind::mlp;
  else if (type == "cnn")
    mc.type = model_config::kind::cnn;
  else
    return bad("unknown model type \"" + type + "\" in its config");
  auto hidden = identity_int_list(get("/model/hidden"));
  if (!hidden)
    return bad("unreadable /model/hidden in its config");
  mc.hidden = *hidden;
  auto act = get("/model/activation");
  if (act == "relu")
    mc.act = activation::relu;
  else if (act == "sigmoid")
    mc.act = activation::sigmoid;
  else if (act == "tanh")
    mc.act = activation::tanh;
  else
    return bad("unknown activation \"" + act + "\" in its config");
  if (mc.type == model_config::kind::cnn) {
    auto convs = identity_int_list(get("/model/conv_channels"));
    auto kernel = std::atoi(get("/model/kernel_size").c_str());
    if (!convs || convs->size() != 2 || kernel < 1 || kernel > 15)
      return bad("unreadable convolutions in its config");
    mc.conv_channels = *convs;
    mc.kernel_size = kernel;
  }
  // The classes are the output layer's bias: the dense layer of the
  // highest number (the file's order of tensors is not the model's).
  int classes = 0, last = -1;
  for (auto& t : ckpt.layout.tensors()) {
    int n = -1;
    char tail[3] = {};
    if (std::sscanf(t.name.c_str(), "dense%d/%2s", &n, tail) == 2
        && std::string{tail} == "b" && n > last && t.dims.size() == 1) {
      last = n;
      classes = static_cast<int>(t.dims[0]);
    }
  }
  if (last < 0 || classes < 2)
    return bad("no output layer (denseN/b) among its tensors");
  return build_and_load(ckpt, path, mc, classes, height, width, channels, be);
}

} // namespace troupe
