#include "runtime/config.hpp"

#include <fstream>
#include <initializer_list>
#include <limits>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "runtime/errc.hpp"
#include "runtime/json_text.hpp"

namespace troupe {

namespace {

bool has_control(const std::string& text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f)
      return true;
  return false;
}

} // namespace

const char* to_string(model_config::kind k) {
  switch (k) {
    case model_config::kind::softmax: return "softmax";
    case model_config::kind::mlp: return "mlp";
    case model_config::kind::cnn: return "cnn";
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
  return "expected \"cpu\", \"gpu\" or \"gpu:N\", found \""
         + printable(text) + "\"";
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

using json = nlohmann::json;

/// Thrown inside this file only; load_run_config turns it into a caf::error.
struct config_error {
  errc code;
  std::string pointer;
  std::string message;
};

std::string found(const json& j) {
  switch (j.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::null: return "null";
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::string: return j.dump();
    default: return j.dump();
  }
}

[[noreturn]] void fail(const std::string& pointer, const std::string& expected,
                       const json& got) {
  throw config_error{errc::invalid_config, pointer,
                     "expected " + expected + ", found " + found(got)};
}

/// Reads the members of one JSON object, remembering which keys it consumed
/// so that finish() can refuse the rest.
class object_reader {
public:
  object_reader(const json& j, std::string pointer)
    : j_(j), pointer_(std::move(pointer)) {
    if (!j_.is_object())
      fail(pointer_.empty() ? "/" : pointer_, "an object", j_);
  }

  std::string at(const std::string& key) const { return pointer_ + "/" + key; }

  const json* find(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  const json& require(const std::string& key) {
    if (auto* v = find(key))
      return *v;
    throw config_error{errc::invalid_config, at(key),
                       "missing required key \"" + key + "\""};
  }

  int64_t integer(const std::string& key, int64_t fallback, int64_t min,
                  int64_t max = std::numeric_limits<int64_t>::max()) {
    auto* v = find(key);
    return v == nullptr ? fallback : integer_value(*v, at(key), min, max);
  }

  double number(const std::string& key, double fallback, double min,
                double max, bool min_exclusive = false) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    std::ostringstream range;
    range << "a number " << (min_exclusive ? "> " : ">= ") << min;
    if (max < std::numeric_limits<double>::max())
      range << " and <= " << max;
    if (!v->is_number())
      fail(at(key), range.str(), *v);
    double x = v->get<double>();
    if ((min_exclusive ? x <= min : x < min) || x > max)
      fail(at(key), range.str(), *v);
    return x;
  }

  bool boolean(const std::string& key, bool fallback) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    if (!v->is_boolean())
      fail(at(key), "true or false", *v);
    return v->get<bool>();
  }

  std::string string(const std::string& key, std::string fallback) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    if (!v->is_string())
      fail(at(key), "a string", *v);
    return v->get<std::string>();
  }

  /// One of `names`; returns its index.
  template <class Enum>
  Enum choice(const std::string& key, Enum fallback,
              std::initializer_list<std::pair<const char*, Enum>> names,
              bool required = false) {
    auto* v = required ? &require(key) : find(key);
    if (v == nullptr)
      return fallback;
    std::string options;
    for (auto& [name, value] : names)
      options += (options.empty() ? "" : "|") + std::string{name};
    if (v->is_string())
      for (auto& [name, value] : names)
        if (v->get<std::string>() == name)
          return value;
    fail(at(key), "one of " + options, *v);
  }

  std::vector<int> int_list(const std::string& key, std::vector<int> fallback,
                            int min, int max = std::numeric_limits<int>::max(),
                            size_t max_entries = 64) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    if (!v->is_array() || v->size() > max_entries)
      fail(at(key),
           "an array of at most " + std::to_string(max_entries) + " integers",
           *v);
    std::vector<int> out;
    for (size_t i = 0; i < v->size(); ++i)
      out.push_back(static_cast<int>(integer_value(
        (*v)[i], at(key) + "/" + std::to_string(i), min, max)));
    return out;
  }

  std::vector<std::string> string_list(const std::string& key) {
    auto* v = find(key);
    if (v == nullptr)
      return {};
    if (!v->is_array())
      fail(at(key), "an array of strings", *v);
    std::vector<std::string> out;
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string())
        fail(at(key) + "/" + std::to_string(i), "a string", (*v)[i]);
      out.push_back((*v)[i].get<std::string>());
    }
    return out;
  }

  /// Rejects every key that no accessor asked for.
  void finish() const {
    for (auto& [key, value] : j_.items())
      if (seen_.count(key) == 0)
        throw config_error{errc::invalid_config, at(key),
                           "unknown key \"" + key + "\""};
  }

private:
  static int64_t integer_value(const json& v, const std::string& pointer,
                               int64_t min, int64_t max) {
    std::string expected = min == 1   ? "a positive integer"
                           : min == 0 ? "a non-negative integer"
                                      : "an integer >= " + std::to_string(min);
    if (max < std::numeric_limits<int>::max())
      expected += " <= " + std::to_string(max);
    if (!v.is_number_integer())
      fail(pointer, expected, v);
    auto x = v.is_number_unsigned()
               ? static_cast<int64_t>(std::min<uint64_t>(
                 v.get<uint64_t>(),
                 static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
               : v.get<int64_t>();
    if (x < min || x > max)
      fail(pointer, expected, v);
    return x;
  }

  const json& j_;
  std::string pointer_;
  std::set<std::string> seen_;
};

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || (!name.empty() && name.front() == '/'))
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

/// Refuses a dataset path with a control character: its file name goes
/// into the training identity, one "key=value" line per setting.
void check_path(const std::string& path, const std::string& pointer) {
  if (has_control(path))
    throw config_error{errc::invalid_config, pointer,
                       "expected a path without control characters, found \""
                         + path + "\""};
}

/// A dataset file: resolved against dir and required to exist.
std::string data_file(object_reader& r, const std::string& key,
                      const std::string& dir, const std::string& fallback) {
  auto path = join(dir, r.string(key, fallback));
  check_path(path, r.at(key));
  if (!file_exists(path))
    throw config_error{errc::file_not_found, r.at(key),
                       "dataset file not found: " + path};
  return path;
}

model_config read_model(object_reader r) {
  using mk = model_config::kind;
  using ik = model_config::init_kind;
  model_config m;
  m.type = r.choice<mk>(
    "type", mk::mlp, {{"softmax", mk::softmax}, {"mlp", mk::mlp}, {"cnn", mk::cnn}},
    true);
  m.hidden = r.int_list("hidden", m.type == mk::mlp ? std::vector<int>{256, 128}
                                                     : std::vector<int>{},
                        1, 1 << 16);
  if (m.type == mk::softmax && !m.hidden.empty())
    throw config_error{errc::invalid_config, r.at("hidden"),
                       "softmax regression has no hidden layers"};
  m.act = r.choice<activation>("activation", activation::relu,
                               {{"relu", activation::relu},
                                {"sigmoid", activation::sigmoid},
                                {"tanh", activation::tanh}});
  m.init = r.choice<ik>("init", ik::he,
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
  r.finish();
  return m;
}

data_config read_data(object_reader r) {
  using dk = data_config::kind;
  data_config d;
  d.format = r.choice<dk>("format", dk::idx,
                          {{"idx", dk::idx}, {"cifar10", dk::cifar10},
                           {"synthetic", dk::synthetic}},
                          true);
  switch (d.format) {
    case dk::idx: {
      auto dir = r.string("dir", "");
      d.train_images = data_file(r, "train_images", dir,
                                 "train-images-idx3-ubyte.gz");
      d.train_labels = data_file(r, "train_labels", dir,
                                 "train-labels-idx1-ubyte.gz");
      d.test_images = data_file(r, "test_images", dir,
                                "t10k-images-idx3-ubyte.gz");
      d.test_labels = data_file(r, "test_labels", dir,
                                "t10k-labels-idx1-ubyte.gz");
      break;
    }
    case dk::cifar10: {
      auto dir = r.string("dir", "");
      auto resolve = [&](const std::string& key,
                         std::vector<std::string> fallback) {
        auto names = r.string_list(key);
        if (names.empty())
          names = std::move(fallback);
        for (size_t i = 0; i < names.size(); ++i) {
          names[i] = join(dir, names[i]);
          check_path(names[i], r.at(key) + "/" + std::to_string(i));
          if (!file_exists(names[i]))
            throw config_error{errc::file_not_found,
                               r.at(key) + "/" + std::to_string(i),
                               "dataset file not found: " + names[i]};
        }
        return names;
      };
      d.train_files = resolve("train_files",
                              {"data_batch_1.bin", "data_batch_2.bin",
                               "data_batch_3.bin", "data_batch_4.bin",
                               "data_batch_5.bin"});
      d.test_files = resolve("test_files", {"test_batch.bin"});
      break;
    }
    case dk::synthetic:
      d.train_samples = r.integer("train_samples", 1000, 1);
      d.test_samples = r.integer("test_samples", 200, 1);
      d.height = static_cast<int>(r.integer("height", 1, 1, 4096));
      d.width = static_cast<int>(r.integer("width", 16, 1, 4096));
      d.channels = static_cast<int>(r.integer("channels", 1, 1, 4096));
      d.classes = static_cast<int>(r.integer("classes", 4, 2, 65536));
      d.noise = r.number("noise", 0.1, 0, 1e3);
      d.seed = static_cast<uint64_t>(r.integer("seed", 1, 0));
      {
        // Generated in memory: bounded before anything is allocated.
        auto per_sample = static_cast<uint64_t>(d.height) * d.width
                          * d.channels;
        if (per_sample > (uint64_t{1} << 24))
          throw config_error{errc::invalid_config, r.at("height"),
                             "samples of " + std::to_string(per_sample)
                               + " values (at most 2^24)"};
        for (auto* key : {"train_samples", "test_samples"}) {
          auto n = static_cast<uint64_t>(key[1] == 'r' ? d.train_samples
                                                       : d.test_samples);
          if (n > (uint64_t{1} << 30) / per_sample)
            throw config_error{errc::invalid_config, r.at(key),
                               std::to_string(n) + " samples of "
                                 + std::to_string(per_sample)
                                 + " values: more than 2^30 values"};
        }
      }
      break;
  }
  r.finish();
  return d;
}

optimizer_config read_optimizer(object_reader r) {
  using ok = optimizer_config::kind;
  optimizer_config o;
  o.type = r.choice<ok>("type", ok::sgd,
                        {{"sgd", ok::sgd}, {"momentum", ok::momentum}, {"adam", ok::adam}});
  o.learning_rate = r.number("learning_rate",
                             o.type == ok::adam ? 0.001 : 0.01, 0,
                             std::numeric_limits<double>::max(), true);
  if (o.type == ok::momentum) {
    o.momentum = r.number("momentum", 0.9, 0, 1);
    o.nesterov = r.boolean("nesterov", false);
  }
  if (o.type == ok::adam) {
    o.beta1 = r.number("beta1", 0.9, 0, 1);
    o.beta2 = r.number("beta2", 0.999, 0, 1);
    o.epsilon = r.number("epsilon", 1e-8, 0, 1, true);
  }
  o.weight_decay = r.number("weight_decay", 0, 0, 1e6);
  if (auto* s = r.find("schedule")) {
    object_reader sr{*s, r.at("schedule")};
    using sk = lr_schedule::kind;
    o.schedule.type = sr.choice<sk>(
      "type", sk::constant, {{"constant", sk::constant}, {"exponential", sk::exponential}},
      true);
    if (o.schedule.type == sk::exponential) {
      o.schedule.decay_steps = static_cast<double>(
        sr.integer("decay_steps", 1000, 1));
      o.schedule.decay_rate = sr.number("decay_rate", 0.96, 0, 1e6, true);
      o.schedule.staircase = sr.boolean("staircase", false);
    }
    sr.finish();
  }
  r.finish();
  return o;
}

device_spec read_device(object_reader& r) {
  auto text = r.string("device", "cpu");
  auto spec = parse_device(text);
  if (!spec)
    throw config_error{errc::invalid_config, r.at("device"),
                       bad_device_message(text)};
  return *spec;
}

training_config read_training(object_reader r) {
  training_config t;
  t.batch_size = static_cast<int>(r.integer("batch_size", 128, 1, 1 << 20));
  t.epochs = static_cast<int>(r.integer("epochs", 10, 1, 1 << 20));
  t.max_steps = r.integer("max_steps", 0, 0);
  t.seed = static_cast<uint64_t>(r.integer("seed", 1, 0));
  t.threads = static_cast<int>(r.integer("threads", 1, 1, 256));
  t.device = read_device(r);
  t.log_every_steps = r.integer("log_every_steps", 100, 1);
  t.eval_every_steps = r.integer("eval_every_steps", 0, 0);
  if (auto* o = r.find("optimizer"))
    t.optimizer = read_optimizer(object_reader{*o, r.at("optimizer")});
  if (auto* c = r.find("checkpoint")) {
    object_reader cr{*c, r.at("checkpoint")};
    t.checkpoint.dir = cr.string("dir", "");
    if (t.checkpoint.dir.empty())
      throw config_error{errc::invalid_config, cr.at("dir"),
                         "missing required key \"dir\""};
    t.checkpoint.every_steps = cr.integer("every_steps", 0, 0);
    t.checkpoint.resume = cr.boolean("resume", false);
    t.checkpoint.keep = static_cast<int>(cr.integer("keep", 5, 0, 1 << 20));
    cr.finish();
  }
  r.finish();
  return t;
}

/// Far more processes than one chief coordinates; the bound also keeps the
/// checks for repeated names and addresses below (each node against the
/// ones before it) cheap: 20,000 nodes took 1 s, the 250,000 that fit in
/// a 16 MB file would take nearly three minutes.
constexpr size_t max_nodes = 1024;

std::vector<node_config> read_nodes(const json& v, const std::string& at) {
  if (!v.is_array() || v.empty())
    fail(at, "a non-empty array of nodes", v);
  if (v.size() > max_nodes)
    throw config_error{errc::invalid_config, at,
                       "expected at most " + std::to_string(max_nodes)
                         + " nodes, found " + std::to_string(v.size())};
  std::vector<node_config> nodes;
  for (size_t i = 0; i < v.size(); ++i) {
    object_reader r{v[i], at + "/" + std::to_string(i)};
    node_config n;
    // Names and hosts go into messages, logs and the training identity
    // (one "key=value" line each): no control characters.
    auto name = r.require("name");
    if (!name.is_string() || name.get<std::string>().empty()
        || has_control(name.get<std::string>()))
      fail(r.at("name"), "a non-empty string without control characters",
           name);
    n.name = name.get<std::string>();
    for (auto& m : nodes)
      if (m.name == n.name)
        throw config_error{errc::invalid_config, r.at("name"),
                           "node \"" + n.name + "\" is listed twice"};
    n.host = r.string("host", "127.0.0.1");
    if (n.host.empty() || has_control(n.host))
      throw config_error{errc::invalid_config, r.at("host"),
                         "expected a host name or address, got \"" + n.host
                           + "\""};
    r.require("port");
    n.port = static_cast<uint16_t>(r.integer("port", 0, 1, 65535));
    for (auto& m : nodes)
      if (m.host == n.host && m.port == n.port)
        throw config_error{errc::invalid_config, r.at("port"),
                           n.host + ":" + std::to_string(n.port)
                             + " is already node \"" + m.name + "\"'s"};
    n.shards = static_cast<int>(r.integer("shards", 0, 0, 1024));
    n.workers = static_cast<int>(r.integer("workers", 0, 0, 1024));
    if (r.find("device") != nullptr)
      n.device = read_device(r);
    n.certificate = r.string("certificate", "");
    n.key = r.string("key", "");
    if (n.certificate.empty() != n.key.empty())
      throw config_error{errc::invalid_config,
                         r.at(n.key.empty() ? "key" : "certificate"),
                         "a node's own certificate needs its key, and a key "
                         "its certificate"};
    r.finish();
    nodes.push_back(std::move(n));
  }
  return nodes;
}

cluster_tls read_tls(object_reader r, const std::vector<node_config>& nodes) {
  cluster_tls t;
  auto path = [&](const char* key, bool required) {
    if (required)
      r.require(key);
    auto v = r.string(key, "");
    if (required && v.empty())
      throw config_error{errc::invalid_config, r.at(key),
                         "expected the path of a PEM file, got \"\""};
    return v;
  };
  t.ca = path("ca", true);
  bool every_node_has_own = !nodes.empty();
  for (auto& n : nodes)
    every_node_has_own = every_node_has_own && !n.certificate.empty();
  t.certificate = path("certificate", !every_node_has_own);
  t.key = path("key", !every_node_has_own);
  t.handshake_timeout_ms = r.integer("handshake_timeout_ms", 5000, 100,
                                     600000);
  r.finish();
  return t;
}

cluster_config read_cluster(object_reader r) {
  using mk = cluster_config::mode;
  cluster_config c;
  if (auto* v = r.find("nodes")) {
    c.nodes = read_nodes(*v, r.at("nodes"));
    int shards = 0, workers = 0;
    for (auto& n : c.nodes) {
      shards += n.shards;
      workers += n.workers;
    }
    // Counts, where also given, must agree with the placement.
    auto agree = [&](const char* key, int sum) {
      if (r.find(key) != nullptr
          && r.integer(key, sum, 0) != sum)
        throw config_error{errc::invalid_config, r.at(key),
                           "must equal the " + std::string{key}
                             + " of the nodes (" + std::to_string(sum)
                             + "), or be left out"};
    };
    agree("shards", shards);
    agree("workers", workers);
    if (shards == 0)
      throw config_error{errc::invalid_config, r.at("nodes"),
                         "no node holds a shard (give one \"shards\": 1)"};
    if (workers == 0)
      throw config_error{errc::invalid_config, r.at("nodes"),
                         "no node holds a worker (give one \"workers\": 1)"};
    c.shards = shards;
    c.workers = workers;
    c.chief_node = r.string("chief", c.nodes.front().name);
    if (c.node(c.chief_node) == nullptr)
      throw config_error{errc::invalid_config, r.at("chief"),
                         "unknown node \"" + c.chief_node
                           + "\" (the nodes are: " + c.node_names() + ")"};
  } else {
    c.shards = static_cast<int>(r.integer("shards", 2, 1, 1024));
    c.workers = static_cast<int>(r.integer("workers", 2, 1, 1024));
    if (r.find("chief") != nullptr)
      throw config_error{errc::invalid_config, r.at("chief"),
                         "needs \"nodes\" to name"};
  }
  c.consistency = r.choice("mode", mk::async,
                           {{"async", mk::async}, {"sync", mk::sync},
                            {"ssp", mk::ssp}, {"easgd", mk::easgd}});
  c.replicas_to_aggregate = static_cast<int>(
    r.integer("replicas_to_aggregate", 0, 0, 1024));
  if (c.replicas_to_aggregate > c.workers)
    throw config_error{errc::invalid_config, r.at("replicas_to_aggregate"),
                       "must be <= number of workers ("
                         + std::to_string(c.workers) + "), got "
                         + std::to_string(c.replicas_to_aggregate)};
  c.staleness = static_cast<int>(r.integer("staleness", 3, 0, 1 << 20));
  c.tau = static_cast<int>(r.integer("tau", 4, 1, 1 << 20));
  c.beta = r.number("beta", 0.9, 0, 1, true);
  c.moving_rate = r.number("moving_rate", 0, 0, 1);
  c.max_restarts = static_cast<int>(r.integer("max_restarts", 3, 0, 1 << 20));
  c.restart_window_s = r.number("restart_window_s", 60, 0, 1e9, true);
  c.target_accuracy = r.number("target_accuracy", 0, 0, 1);
  c.request_timeout_ms = r.integer("request_timeout_ms", 30000, 1);
  c.metrics_dir = r.string("metrics_dir", "");
  c.node_timeout_s = r.number("node_timeout_s", 30, 0, 1e6, true);
  c.heartbeat_interval_ms = r.integer("heartbeat_interval_ms", 500, 1,
                                      3600000);
  c.connection_timeout_ms = r.integer("connection_timeout_ms", 3000, 1,
                                      3600000);
  if (c.connection_timeout_ms <= c.heartbeat_interval_ms)
    throw config_error{errc::invalid_config, r.at("connection_timeout_ms"),
                       "must exceed heartbeat_interval_ms ("
                         + std::to_string(c.heartbeat_interval_ms) + ")"};
  c.on_node_loss = r.choice("on_node_loss", cluster_config::node_loss::move,
                            {{"move", cluster_config::node_loss::move},
                             {"wait", cluster_config::node_loss::wait}});
  if (auto* t = r.find("tls"))
    c.tls = read_tls(object_reader{*t, r.at("tls")}, c.nodes);
  for (size_t i = 0; i < c.nodes.size(); ++i)
    if (!c.nodes[i].certificate.empty() && !c.tls.enabled())
      throw config_error{errc::invalid_config,
                         r.at("nodes/" + std::to_string(i) + "/certificate"),
                         "needs /cluster/tls with the cluster's \"ca\""};
  r.finish();
  return c;
}

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
    return make_error(errc::invalid_config,
                      origin + ": nested deeper than "
                        + std::to_string(max_config_depth) + " levels");
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    auto pos = what.find("parse error");
    return make_error(errc::invalid_config,
                      origin + ": invalid JSON at " + position(text, e.byte)
                        + ": "
                        + printable(pos == std::string::npos
                                      ? what
                                      : what.substr(pos)));
  } catch (const json::exception& e) {
    // A number beyond double's range (1e400) is out_of_range, not a parse
    // error.
    std::string what = e.what();
    auto pos = what.find("] ");
    return make_error(errc::invalid_config,
                      origin + ": invalid JSON: "
                        + printable(pos == std::string::npos
                                      ? what
                                      : what.substr(pos + 2)));
  }
  try {
    run_config cfg;
    cfg.origin = origin;
    object_reader r{root, ""};
    cfg.name = r.string("name", "run");
    cfg.model = read_model(object_reader{r.require("model"), "/model"});
    cfg.data = read_data(object_reader{r.require("data"), "/data"});
    if (auto* t = r.find("training"))
      cfg.training = read_training(object_reader{*t, "/training"});
    if (auto* c = r.find("cluster"))
      cfg.cluster = read_cluster(object_reader{*c, "/cluster"});
    r.finish();
    return cfg;
  } catch (const config_error& e) {
    return make_error(e.code, origin + ": " + printable(e.pointer) + ": "
                                + printable(e.message));
  } catch (const json::exception& e) { // defensive: a type error we missed
    return make_error(errc::invalid_config,
                      origin + ": " + printable(e.what()));
  }
}

caf::expected<std::string> read_config_text(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0)
      return make_error(errc::file_not_found,
                        path + ": config file not found");
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
  return parse_run_config(*text, path);
}

} // namespace troupe
