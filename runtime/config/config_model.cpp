// The "model" section of a run config: its type, the shorthands' options
// or its layer list, its embedding tables, an external model's parameters
// file.
#include <string>
#include <vector>

#include "runtime/base/errc.hpp"
#include "runtime/config/config_reader.hpp"

namespace troupe::config_detail {

model_config read_model(object_reader r) {
  using mk = model_config::kind;
  using ik = model_config::init_kind;
  model_config m;
  // A list of layers, or a type that names one (a shorthand) or an
  // external model: "type" is "layers" or absent with a list.
  const bool listed = r.find("layers") != nullptr;
  m.type = r.choice<mk>("type", listed ? mk::layers : mk::mlp,
                        {{"softmax", mk::softmax},
                         {"mlp", mk::mlp},
                         {"cnn", mk::cnn},
                         {"click", mk::click},
                         {"external", mk::external},
                         {"layers", mk::layers}},
                        !listed);
  if (listed != (m.type == mk::layers))
    throw config_error{errc::invalid_config, r.at(listed ? "type" : "layers"),
                       listed ? "a model with \"layers\" has no other type "
                                "(found \""
                                  + std::string{to_string(m.type)}
                                  + "\"): the layers are the model"
                              : "missing required key \"layers\" (type "
                                "\"layers\")"};
  if (m.type == mk::layers) {
    m.layers = read_layers(*r.find("layers"), r.at("layers"));
    m.loss = r.choice<loss_kind>(
      "loss", loss_kind::softmax_cross_entropy,
      {{"softmax_cross_entropy", loss_kind::softmax_cross_entropy},
       {"binary_cross_entropy", loss_kind::binary_cross_entropy},
       {"mean_squared_error", loss_kind::mean_squared_error},
       {"mse", loss_kind::mean_squared_error}});
  }
  if (m.type == mk::external) {
    // Its shapes and initial values are the file's: nothing else to say.
    // Only the chief reads it (and says so when it cannot): the workers
    // get the shapes from the chief, so the other nodes, and nodes that
    // join, need no copy.
    r.require("parameters");
    m.parameters = r.path("parameters", "");
    check_path(m.parameters, r.at("parameters"));
    r.finish();
    return m;
  }
  if (m.type != mk::layers) {
    m.hidden = r.int_list("hidden",
                          m.type == mk::mlp     ? std::vector<int>{256, 128}
                          : m.type == mk::click ? std::vector<int>{64, 32}
                                                : std::vector<int>{},
                          1, 1 << 16);
    if (m.type == mk::softmax && !m.hidden.empty())
      throw config_error{errc::invalid_config, r.at("hidden"),
                         "softmax regression has no hidden layers"};
    m.act = r.choice<activation>("activation", activation::relu,
                                 {{"relu", activation::relu},
                                  {"sigmoid", activation::sigmoid},
                                  {"tanh", activation::tanh}});
  }
  m.init = r.choice<ik>(
    "init", ik::he,
    {{"normal", ik::normal}, {"xavier", ik::xavier}, {"he", ik::he}});
  m.init_stddev = r.number("init_stddev", 1.0, 0, 1e6, true);
  if (m.type == mk::cnn) {
    m.conv_channels = r.int_list("conv_channels", {32, 64}, 1, 4096);
    if (m.conv_channels.size() != 2)
      throw config_error{errc::invalid_config, r.at("conv_channels"),
                         "expected 2 entries (two conv+pool blocks), found "
                           + std::to_string(m.conv_channels.size())};
    m.kernel_size = static_cast<int>(r.integer("kernel_size", 5, 1, 15));
    if (m.kernel_size % 2 == 0)
      throw config_error{errc::invalid_config, r.at("kernel_size"),
                         "expected an odd kernel size, found "
                           + std::to_string(m.kernel_size)};
  }
  m.seed = static_cast<uint64_t>(r.integer("seed", 1, 0));
  if (m.type == mk::click) {
    m.table.dim = 8;
    if (auto* e = r.find("embedding")) {
      auto er = r.inner(*e, "embedding");
      using rk = embedding_table_config::rows;
      m.table.dim = static_cast<int>(er.integer("dim", 8, 1, 1024));
      m.table.create = er.choice<rk>("rows", rk::on_touch,
                                     {{"on_touch", rk::on_touch},
                                      {"fixed", rk::fixed}});
      m.table.init_scale = er.number("init_scale", 0.05, 0, 1e3);
      er.finish();
    }
  }
  r.finish();
  return m;
}

} // namespace troupe::config_detail
