#include "runtime/config/config.hpp"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <sstream>
#include <glob.h>
#include <sys/stat.h>
#include <thread>

#include "runtime/config/config_reader.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/json_text.hpp"
#include "runtime/data/inflated_cache.hpp"

namespace troupe {

using namespace config_detail;

const char* to_string(model_config::kind k) {
  switch (k) {
    case model_config::kind::softmax: return "softmax";
    case model_config::kind::mlp: return "mlp";
    case model_config::kind::cnn: return "cnn";
    case model_config::kind::click: return "click";
    case model_config::kind::external: return "external";
    case model_config::kind::layers: return "layers";
  }
  return "?";
}

std::vector<table_setup> embedding_tables(const run_config& cfg) {
  auto tables = cfg.model.type == model_config::kind::click
                  ? std::vector<table_setup>{{cfg.model.table,
                                              cfg.training.sparse_optimizer}}
                  : cfg.model.tables;
  // An exporting run's rows keep what changed them (delta exports).
  for (auto& t : tables)
    t.table.changes = !cfg.training.exports.dir.empty();
  return tables;
}

std::vector<int> embedding_dims(const model_config& m) {
  if (m.type == model_config::kind::click)
    return {m.table.dim};
  std::vector<int> out;
  for (auto& t : m.tables)
    out.push_back(t.table.dim);
  return out;
}

const char* to_string(data_config::kind k) {
  switch (k) {
    case data_config::kind::idx: return "idx";
    case data_config::kind::cifar10: return "cifar10";
    case data_config::kind::npy: return "npy";
    case data_config::kind::npz: return "npz";
    case data_config::kind::csv: return "csv";
    case data_config::kind::synthetic: return "synthetic";
    case data_config::kind::click: return "click";
    case data_config::kind::external: return "external";
  }
  return "?";
}

std::optional<device_spec> parse_device(const std::string& text) {
  device_spec spec;
  if (text == "cpu")
    return spec;
  if (text.rfind("gpu", 0) != 0)
    return std::nullopt;
  spec.type = device_spec::kind::gpu;
  if (text.size() == 3)
    return spec;
  // "gpu:" then 1 to 4 digits.
  if (text[3] != ':' || text.size() < 5 || text.size() > 8)
    return std::nullopt;
  int index = 0;
  for (size_t i = 4; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9')
      return std::nullopt;
    index = index * 10 + (text[i] - '0');
  }
  spec.index = index;
  return spec;
}

std::string bad_device_message(const std::string& text) {
  return "expected \"cpu\", \"gpu\" or \"gpu:N\", found \"" + printable(text)
         + "\"";
}

const char* to_string(cluster_config::mode m) {
  switch (m) {
    case cluster_config::mode::async: return "async";
    case cluster_config::mode::sync: return "sync";
    case cluster_config::mode::ssp: return "ssp";
    case cluster_config::mode::easgd: return "easgd";
  }
  return "?";
}

namespace {

std::string position(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

} // namespace

/// A config file is a few KB; this is far above any.
constexpr size_t max_config_bytes = 16 << 20;
/// JSON nesting of a config: root, section, object, list (and room).
constexpr int max_config_depth = 16;

caf::expected<run_config> parse_run_config(const std::string& text,
                                           const std::string& origin) {
  return parse_run_config(text, origin, "");
}

std::string config_folder(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  if (ec)
    return {};
  return abs.lexically_normal().parent_path().string();
}

caf::expected<run_config> parse_run_config(const std::string& text,
                                           const std::string& origin,
                                           const std::string& base_dir) {
  json root;
  if (text.size() > max_config_bytes)
    return make_error(errc::invalid_config,
                      origin + ": " + std::to_string(text.size())
                        + " bytes (a config is at most "
                        + std::to_string(max_config_bytes) + ")");
  // Nesting is bounded (a config is four levels deep), so a hostile
  // file cannot exhaust the stack of the code that walks it.
  if (nested_deeper_than(text.data(), text.data() + text.size(),
                         max_config_depth))
    return make_error(errc::invalid_config, origin + ": nested deeper than "
                                              + std::to_string(max_config_depth)
                                              + " levels");
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    auto pos = what.find("parse error");
    return make_error(
      errc::invalid_config,
      origin + ": invalid JSON at " + position(text, e.byte) + ": "
        + printable(pos == std::string::npos ? what : what.substr(pos)));
  } catch (const json::exception& e) {
    // A number beyond double's range (1e400) is out_of_range, not a parse
    // error.
    std::string what = e.what();
    auto pos = what.find("] ");
    return make_error(
      errc::invalid_config,
      origin + ": invalid JSON: "
        + printable(pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  try {
    run_config cfg;
    cfg.origin = origin;
    // Relative paths start from base_dir, or from the file's "base_dir"
    // read from there.
    object_reader top{root, "", base_dir};
    auto base = base_dir;
    if (top.find("base_dir") != nullptr) {
      auto named = top.string("base_dir", "");
      if (named.empty() || has_control(named))
        throw config_error{errc::invalid_config, "/base_dir",
                           "expected a folder, found \"" + named + "\""};
      base = top.from_base(named);
    }
    object_reader r{root, "", base};
    r.find("base_dir"); // read above
    cfg.base_dir = base;
    cfg.name = r.string("name", "run");
    // Training first: an external model's tables that name no optimizer
    // take its sparse_optimizer.
    if (auto* t = r.find("training"))
      cfg.training = read_training(r.inner(*t, "training"));
    cfg.model = read_model(r.inner(r.require("model"), "model"),
                           cfg.training.sparse_optimizer);
    cfg.data = read_data(r.inner(r.require("data"), "data"));
    if (auto* c = r.find("cluster"))
      cfg.cluster = read_cluster(r.inner(*c, "cluster"));
    r.finish();
    if (cfg.training.shuffle_block == 0)
      cfg.training.shuffle_block = cfg.data.stream_train ? streamed_block : 1;
    cfg.data.click_block = static_cast<size_t>(cfg.training.shuffle_block);
    check_click_run(cfg);
    if (cfg.data.follow) {
      // A folder that grows is one epoch that never ends, in its order.
      auto* t = root.contains("training") ? &root["training"] : nullptr;
      auto given = [&](const char* key) {
        return t != nullptr && t->is_object() && t->contains(key);
      };
      if (given("epochs"))
        throw config_error{errc::invalid_config, "/training/epochs",
                           "has no meaning while data.follow takes parts "
                           "as they come: each is trained once (stop the "
                           "run with training.max_steps, "
                           "data.follow.stop_after_idle_seconds or a stop)"};
      if (given("order") && !cfg.training.stream_order)
        throw config_error{errc::invalid_config, "/training/order",
                           "a followed folder is trained in its order "
                           "(\"stream\"), part after part"};
      if (cfg.training.partition != data_partition::shared)
        throw config_error{errc::invalid_config, "/training/data_partition",
                           "a followed folder is one stream that every "
                           "worker leases from (\"shared\")"};
      cfg.training.stream_order = true;
      cfg.training.epochs = 1;
    }
    check_external_run(cfg);
    check_targets(cfg);
    resolve_overlap(cfg);
    if (!cfg.training.exports.dir.empty() && embedding_tables(cfg).empty())
      throw config_error{errc::invalid_config, "/training/export",
                         "the model has no embedding tables to export (a "
                         "click model's, or /model/tables)"};
    return cfg;
  } catch (const config_error& e) {
    return make_error(e.code, origin + ": " + printable(e.pointer) + ": "
                                + printable(e.message));
  } catch (const json::exception& e) { // defensive: a type error we missed
    return make_error(errc::invalid_config,
                      origin + ": " + printable(e.what()));
  }
}

caf::expected<std::string>
apply_settings(const std::string& text, const std::string& origin,
               const std::vector<config_setting>& settings) {
  if (settings.empty())
    return text;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception&) {
    return text;
  }
  for (auto& s : settings) {
    try {
      root[json::json_pointer{s.pointer}] = json::parse(s.value);
    } catch (const json::exception&) {
      return make_error(errc::invalid_config,
                        origin + ": " + printable(s.pointer)
                          + ": cannot be set: a value on its way is not an "
                            "object");
    }
  }
  return root.dump(2);
}

caf::expected<std::string> with_base_dir(const std::string& text,
                                         const run_config& cfg) {
  if (cfg.base_dir.empty())
    return text;
  return apply_settings(text, cfg.origin,
                        {{"/base_dir", json_quoted(cfg.base_dir)}});
}

caf::expected<std::string> read_config_text(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0)
      return make_error(errc::file_not_found, path + ": config file not found");
    return make_error(errc::io_error, path + ": cannot read config file");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

caf::expected<run_config> load_run_config(const std::string& path) {
  auto text = read_config_text(path);
  if (!text)
    return text.error();
  return parse_run_config(*text, path, config_folder(path));
}

int compute_threads(int configured, int workers_here) {
  if (configured > 0)
    return configured;
  const int cores = static_cast<int>(
    std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, workers_here));
}

} // namespace troupe
