// The "model" section of a run config: its type, the shorthands' options
// or its layer list, its embedding tables, an external model's parameters
// file.
#include <cctype>
#include <string>
#include <vector>

#include "runtime/base/errc.hpp"
#include "runtime/config/config_reader.hpp"
#include "runtime/sparse/admission_filter.hpp"

namespace troupe::config_detail {

namespace {

/// Whether `name` may name a table: letters, digits, '_', '.' and '-',
/// as a checkpoint's file names and the metrics' labels take them.
bool table_name_ok(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

/// A table's "admit" ({"min_count", "expected_keys", "false_positive"} or
/// {"probability"}) and "evict" ({"steps_to_live", "max_rows", "victims"})
/// under `tr`, the table's object.
void read_row_bounds(object_reader& tr, embedding_table_config& t) {
  if (auto* a = tr.find("admit")) {
    auto ar = tr.inner(*a, "admit"); // refuses what is no object
    const bool counted = a->contains("min_count");
    if (counted == a->contains("probability"))
      throw config_error{errc::invalid_config, tr.at("admit"),
                         "expected one of \"min_count\" (a row once its "
                         "key is pushed that often) and \"probability\" (a "
                         "row with that chance at each push of its key)"};
    if (counted) {
      t.admit.type = row_admission::kind::min_count;
      t.admit.min_count = static_cast<int>(
        ar.integer("min_count", 2, 2, admission_filter::max_count));
      t.admit.expected_keys = static_cast<uint64_t>(
        ar.integer("expected_keys", 1000000, 1, int64_t{1} << 36));
      t.admit.false_positive = ar.number("false_positive", 0.01, 0, 0.5, true);
    } else {
      t.admit.type = row_admission::kind::probability;
      t.admit.probability = ar.number("probability", 1, 0, 1, true);
    }
    ar.finish();
  }
  if (auto* e = tr.find("evict")) {
    auto er = tr.inner(*e, "evict");
    t.evict.steps_to_live = er.integer("steps_to_live", 0, 0);
    t.evict.max_rows = static_cast<uint64_t>(
      er.integer("max_rows", 0, 0, int64_t{1} << 40));
    t.evict.victims = er.choice<row_eviction::policy>(
      "victims", row_eviction::policy::lru,
      {{"lru", row_eviction::policy::lru}, {"lfu", row_eviction::policy::lfu}});
    if (!t.evict.any())
      throw config_error{errc::invalid_config, tr.at("evict"),
                         "expected \"steps_to_live\" or \"max_rows\" above "
                         "0: with neither, no row goes"};
    er.finish();
  }
  if (t.create == embedding_table_config::rows::fixed
      && (t.admit.type != row_admission::kind::all || t.evict.any()))
    throw config_error{errc::invalid_config,
                       tr.at(t.evict.any() ? "evict" : "admit"),
                       "a table of fixed rows holds every row from the "
                       "start: nothing to admit or evict (use \"rows\": "
                       "\"on_touch\")"};
}

/// An external model's "tables": [{"name", "vocabulary", "dim",
/// "init_scale", "optimizer"}, ...].
std::vector<table_setup> read_tables(object_reader& r, const json& j,
                                     const sparse_optimizer_config& sparse,
                                     uint64_t model_seed) {
  constexpr size_t max_tables = 256;
  if (!j.is_array() || j.size() > max_tables)
    fail(r.at("tables"),
         "an array of at most " + std::to_string(max_tables) + " table objects",
         j);
  std::vector<table_setup> out;
  for (size_t i = 0; i < j.size(); ++i) {
    auto key = "tables/" + std::to_string(i);
    auto tr = r.inner(j[i], key);
    table_setup t;
    t.table.name = tr.string("name", "");
    tr.require("name");
    if (!table_name_ok(t.table.name))
      throw config_error{errc::invalid_config, tr.at("name"),
                         "expected 1 to 64 letters, digits, '_', '.' or '-', "
                         "found \""
                           + t.table.name + "\""};
    for (auto& before : out)
      if (before.table.name == t.table.name)
        throw config_error{errc::invalid_config, tr.at("name"),
                           "a second table named \"" + t.table.name + "\""};
    tr.require("vocabulary");
    t.table.vocabulary = static_cast<uint64_t>(
      tr.integer("vocabulary", 1, 1, int64_t{1} << 40));
    t.table.dim = static_cast<int>(tr.integer("dim", 16, 1, 1024));
    t.table.init_scale = tr.number("init_scale", 0.05, 0, 1e3);
    read_row_bounds(tr, t.table);
    // Each table its own draws: two tables' row k start unlike.
    t.table.seed = model_seed ^ (0x9e3779b97f4a7c15ull * (i + 1));
    t.optimizer = sparse;
    if (auto* o = tr.find("optimizer"))
      t.optimizer = read_sparse_optimizer(tr.inner(*o, "optimizer"));
    tr.finish();
    out.push_back(std::move(t));
  }
  return out;
}

} // namespace

model_config read_model(object_reader r,
                        const sparse_optimizer_config& sparse) {
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
    m.seed = static_cast<uint64_t>(r.integer("seed", 1, 0));
    if (auto* t = r.find("tables"))
      m.tables = read_tables(r, *t, sparse, m.seed);
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
      read_row_bounds(er, m.table);
      er.finish();
    }
  }
  r.finish();
  return m;
}

} // namespace troupe::config_detail
