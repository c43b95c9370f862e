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

std::vector<embedding_table_config> embedding_tables(const model_config& m) {
  if (m.type != model_config::kind::click)
    return {};
  return {m.table};
}

std::vector<int> embedding_dims(const model_config& m) {
  std::vector<int> out;
  for (auto& t : embedding_tables(m))
    out.push_back(t.dim);
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

/// A dataset file's resolved `path`, checked and required to exist;
/// `where` is its key's pointer, for errors.
std::string existing_file(std::string path, const std::string& where) {
  check_path(path, where);
  if (!file_exists(path))
    throw config_error{errc::file_not_found, where,
                       "dataset file not found: " + path};
  return path;
}

/// A dataset file: resolved against dir and required to exist.
std::string data_file(object_reader& r, const std::string& key,
                      const std::string& dir, const std::string& fallback,
                      bool required = false) {
  if (required)
    r.require(key);
  return existing_file(r.from_base(join(dir, r.string(key, fallback))),
                       r.at(key));
}

/// A dataset given as one file, a glob ("parts/x-*.npy", matched in name
/// order) or a list of files or globs: each resolved against dir and
/// required to exist; a glob that matches no file is an error.
std::vector<std::string> data_files(object_reader& r, const std::string& key,
                                    const std::string& dir) {
  r.require(key);
  auto* v = r.find(key);
  std::vector<std::string> names = v->is_array()
                                     ? r.string_list(key)
                                     : std::vector{r.string(key, "")};
  if (names.empty())
    throw config_error{errc::invalid_config, r.at(key),
                       "expected a file, a glob or a list of them"};
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    auto where = v->is_array() ? r.at(key) + "/" + std::to_string(i)
                               : r.at(key);
    auto path = r.from_base(join(dir, names[i]));
    if (path.find_first_of("*?[") == std::string::npos) {
      out.push_back(existing_file(std::move(path), where));
      continue;
    }
    check_path(path, where);
    glob_t found{};
    int rc = ::glob(path.c_str(), GLOB_ERR, nullptr, &found);
    std::vector<std::string> matched;
    for (size_t k = 0; rc == 0 && k < found.gl_pathc; ++k)
      if (file_exists(found.gl_pathv[k]))
        matched.push_back(found.gl_pathv[k]);
    ::globfree(&found);
    if (matched.empty())
      throw config_error{errc::file_not_found, where,
                         "no dataset file matches " + path};
    // glob(3) sorts by the locale's collation; parts are numbered, and
    // every node must see them in one order.
    std::sort(matched.begin(), matched.end());
    out.insert(out.end(), matched.begin(), matched.end());
  }
  return out;
}

/// Feature files and their label files, paired in order.
void paired_files(object_reader& r, const std::string& features,
                  const std::string& labels, const std::string& dir,
                  std::vector<std::string>& feature_files,
                  std::vector<std::string>& label_files) {
  feature_files = data_files(r, features, dir);
  label_files = data_files(r, labels, dir);
  if (feature_files.size() != label_files.size())
    throw config_error{errc::invalid_config, r.at(labels),
                       std::to_string(label_files.size()) + " label files for "
                         + std::to_string(feature_files.size())
                         + " feature files in " + r.at(features)
                         + " (one of each per part, in the same order)"};
}

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

data_config read_data(object_reader r) {
  using dk = data_config::kind;
  data_config d;
  d.format = r.choice<dk>("format", dk::idx,
                          {{"idx", dk::idx}, {"cifar10", dk::cifar10},
                           {"synthetic", dk::synthetic}, {"npy", dk::npy},
                           {"npz", dk::npz}, {"csv", dk::csv},
                           {"click", dk::click}, {"external", dk::external}},
                          true);
  if (d.format == dk::idx || d.format == dk::npy || d.format == dk::npz
      || d.format == dk::csv)
    d.file_classes = static_cast<int>(r.integer("classes", 0, 2, max_classes));
  switch (d.format) {
    case dk::npy: {
      auto dir = r.string("dir", "");
      paired_files(r, "train", "train_labels", dir, d.train_files,
                   d.train_label_files);
      paired_files(r, "test", "test_labels", dir, d.test_files,
                   d.test_label_files);
      break;
    }
    case dk::npz: {
      d.archive = data_file(r, "file", r.string("dir", ""), "", true);
      const char* keys[] = {"train", "train_labels", "test", "test_labels"};
      for (size_t i = 0; i < 4; ++i) {
        d.arrays[i] = r.string(keys[i], d.arrays[i]);
        if (d.arrays[i].empty() || has_control(d.arrays[i]))
          throw config_error{errc::invalid_config, r.at(keys[i]),
                             "expected the name of an array in the archive"};
      }
      break;
    }
    case dk::csv: {
      auto dir = r.string("dir", "");
      d.train_files = data_files(r, "train", dir);
      d.test_files = data_files(r, "test", dir);
      // A name, or (for float targets) a list of names.
      auto* names = r.find("label_column");
      if (names != nullptr && names->is_array()) {
        d.label_columns = r.string_list("label_column");
        if (d.label_columns.empty())
          throw config_error{errc::invalid_config, r.at("label_column"),
                             "expected a column name or a list of them"};
      } else {
        d.label_columns = {r.string("label_column", "label")};
      }
      for (size_t i = 0; i < d.label_columns.size(); ++i)
        if (d.label_columns[i].empty() || has_control(d.label_columns[i]))
          throw config_error{errc::invalid_config,
                             r.at("label_column")
                               + (names != nullptr && names->is_array()
                                    ? "/" + std::to_string(i)
                                    : std::string{}),
                             "expected a column name"};
      break;
    }
    case dk::click: {
      auto dir = r.string("dir", "");
      d.train_files = data_files(r, "train", dir);
      d.test_files = data_files(r, "test", dir);
      // Streamed unless asked otherwise where memory could not hold the
      // set as text: gzipped or in many parts.
      bool large = d.train_files.size() > 1;
      for (auto& f : d.train_files)
        large = large
                || (f.size() > 3 && f.compare(f.size() - 3, 3, ".gz") == 0);
      d.stream_train = r.choice<bool>("read", large,
                                      {{"memory", false}, {"stream", true}});
      d.click_numeric = static_cast<int>(r.integer("numeric", 0, 0, 1024));
      r.require("categorical"); // no default: it is the file's shape
      d.click_categorical = static_cast<int>(
        r.integer("categorical", 0, 1, 1024));
      d.click_vocabulary = static_cast<uint64_t>(
        r.integer("vocabulary", int64_t{1} << 24, 1, int64_t{1} << 40));
      break;
    }
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
        for (size_t i = 0; i < names.size(); ++i)
          names[i] = existing_file(r.from_base(join(dir, names[i])),
                                   r.at(key) + "/" + std::to_string(i));
        return names;
      };
      d.train_files = resolve("train_files",
                              {"data_batch_1.bin", "data_batch_2.bin",
                               "data_batch_3.bin", "data_batch_4.bin",
                               "data_batch_5.bin"});
      d.test_files = resolve("test_files", {"test_batch.bin"});
      break;
    }
    case dk::external:
      // Only indices travel: any count a 64-bit plan holds.
      r.require("train_samples");
      d.train_samples = r.integer("train_samples", 1, 1, int64_t{1} << 40);
      d.test_samples = r.integer("test_samples", 0, 0, int64_t{1} << 40);
      break;
    case dk::synthetic:
      d.train_samples = r.integer("train_samples", 1000, 1);
      d.test_samples = r.integer("test_samples", 200, 1);
      d.height = static_cast<int>(r.integer("height", 1, 1, 4096));
      d.width = static_cast<int>(r.integer("width", 16, 1, 4096));
      d.channels = static_cast<int>(r.integer("channels", 1, 1, 4096));
      d.classes = static_cast<int>(r.integer("classes", 4, 2, max_classes));
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
  if (d.format == dk::idx || d.format == dk::npz) {
    // Compressed files are inflated once into a cache on local disk and
    // mapped, unless memory is asked for.
    bool cached = r.choice<bool>("read", true,
                                 {{"map", true}, {"memory", false}});
    auto dir = r.string("cache_dir", "");
    if (cached)
      d.cache_dir = dir.empty() ? default_data_cache_dir() : r.from_base(dir);
  }
  d.validation_split = r.number("validation_split", 0, 0, 0.9);
  d.validation_seed = static_cast<uint64_t>(r.integer("validation_seed", 1, 0));
  d.skip_changed_files = r.choice<bool>("on_file_change", false,
                                        {{"stop", false}, {"skip", true}});
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
    // A float in the update: a smaller one rounds to 0, and a weight
    // whose gradient stays 0 then divides 0 by 0.
    o.epsilon = r.number("epsilon", 1e-8, std::numeric_limits<float>::min(), 1);
  }
  o.weight_decay = r.number("weight_decay", 0, 0, 1e6);
  if (auto* s = r.find("schedule")) {
    auto sr = r.inner(*s, "schedule");
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

sparse_optimizer_config read_sparse_optimizer(object_reader r) {
  using sk = sparse_optimizer_config::kind;
  sparse_optimizer_config o;
  o.type = r.choice<sk>("type", sk::adagrad,
                        {{"sgd", sk::sgd}, {"adagrad", sk::adagrad},
                         {"adam", sk::adam}});
  o.learning_rate = r.number("learning_rate",
                             o.type == sk::adam ? 0.001 : 0.05, 0,
                             std::numeric_limits<double>::max(), true);
  if (o.type == sk::adagrad)
    o.initial_accumulator = r.number("initial_accumulator", 0.1, 0, 1e6,
                                     true);
  if (o.type == sk::adam) {
    o.beta1 = r.number("beta1", 0.9, 0, 1);
    o.beta2 = r.number("beta2", 0.999, 0, 1);
    // A float in the update: a smaller one rounds to 0, and a weight
    // whose gradient stays 0 then divides 0 by 0.
    o.epsilon = r.number("epsilon", 1e-8, std::numeric_limits<float>::min(), 1);
  }
  r.finish();
  return o;
}

/// What a click model and click logs require of each other and of the
/// rest of the run; called once every section is read.
void check_click_run(run_config& cfg) {
  bool model = cfg.model.type == model_config::kind::click;
  bool data = cfg.data.format == data_config::kind::click;
  if (model && !data)
    throw config_error{errc::invalid_config, "/model/type",
                       "a click model trains on click logs (data.format "
                       "\"click\"), found data.format \""
                         + std::string{to_string(cfg.data.format)} + "\""};
  if (data && !model)
    throw config_error{errc::invalid_config, "/data/format",
                       "click logs train a click model (model.type "
                       "\"click\"), found model.type \""
                         + std::string{to_string(cfg.model.type)} + "\""};
  if (!model)
    return;
  if (cfg.cluster.consistency == cluster_config::mode::easgd)
    throw config_error{errc::invalid_config, "/cluster/mode",
                       "easgd is not supported for a model with embedding "
                       "tables (model.type \"click\"): its workers would "
                       "each train a private copy of the table; use async, "
                       "sync or ssp"};
  if (cfg.data.validation_split > 0)
    throw config_error{errc::invalid_config, "/data/validation_split",
                       "not supported for click logs yet: hold a "
                       "validation file out as the test file"};
  auto& t = cfg.model.table;
  t.name = "embedding";
  t.vocabulary = cfg.data.click_vocabulary;
  t.seed = cfg.model.seed;
  cfg.model.table_fields = cfg.data.click_categorical;
  // Every shard of a fixed table holds all of its rows (a row's slot is
  // its id), so a fixed table is for small vocabularies.
  if (t.create == embedding_table_config::rows::fixed
      && t.vocabulary * static_cast<uint64_t>(t.dim) > (uint64_t{1} << 28))
    throw config_error{errc::invalid_config, "/model/embedding/rows",
                       "a fixed table of " + std::to_string(t.vocabulary)
                         + " rows of " + std::to_string(t.dim)
                         + " floats is over 2^28 floats per shard: use "
                           "\"on_touch\""};
}

/// What an external model and the user's own data require of each other
/// and of the rest of the run; called once every section is read.
/// The labels the loss reads (data.targets), and what needs class labels.
void check_targets(run_config& cfg) {
  auto& d = cfg.data;
  switch (cfg.model.loss) {
    case loss_kind::softmax_cross_entropy:
      d.targets = target_kind::classes;
      break;
    case loss_kind::binary_cross_entropy:
      d.targets = target_kind::probabilities;
      break;
    case loss_kind::mean_squared_error: d.targets = target_kind::values; break;
  }
  if (d.format == data_config::kind::csv && d.label_columns.size() > 1
      && d.targets == target_kind::classes)
    throw config_error{errc::invalid_config, "/data/label_column",
                       "a list of columns holds float targets (model.loss "
                       "binary_cross_entropy or mean_squared_error); "
                       "softmax_cross_entropy reads one column of class "
                       "labels"};
  if (d.targets == target_kind::classes)
    return;
  const std::string loss = to_string(cfg.model.loss);
  if (d.format != data_config::kind::npy && d.format != data_config::kind::npz
      && d.format != data_config::kind::csv)
    throw config_error{errc::invalid_config, "/model/loss",
                       loss
                         + " reads float targets, which data.format npy, "
                           "npz and csv hold; found data.format \""
                         + std::string{to_string(d.format)} + "\""};
  if (d.file_classes != 0)
    throw config_error{errc::invalid_config, "/data/classes",
                       loss
                         + " reads float targets, whose count per sample "
                           "the data says: drop data.classes"};
  if (cfg.cluster.target_accuracy > 0 && d.targets == target_kind::values)
    throw config_error{errc::invalid_config, "/cluster/target_accuracy",
                       "a regression (mean_squared_error) has no accuracy "
                       "to reach: drop target_accuracy"};
}

void check_external_run(const run_config& cfg) {
  bool model = cfg.model.type == model_config::kind::external;
  bool data = cfg.data.format == data_config::kind::external;
  if (model && !data)
    throw config_error{errc::invalid_config, "/model/type",
                       "an external model trains on the user's own data "
                       "(data.format \"external\" with train_samples), found "
                       "data.format \""
                         + std::string{to_string(cfg.data.format)} + "\""};
  if (data && !model)
    throw config_error{errc::invalid_config, "/data/format",
                       "external data is read by an external model's own "
                       "step function (model.type \"external\"), found "
                       "model.type \""
                         + std::string{to_string(cfg.model.type)} + "\""};
  if (!model)
    return;
  if (cfg.cluster.consistency == cluster_config::mode::easgd)
    throw config_error{errc::invalid_config, "/cluster/mode",
                       "easgd is not supported for an external model: its "
                       "workers take local optimizer steps on a model troupe "
                       "computes, while an external step function returns "
                       "gradients; use async, sync or ssp"};
  if (cfg.data.validation_split > 0)
    throw config_error{errc::invalid_config, "/data/validation_split",
                       "not supported for external data: the step function "
                       "reads the user's own data, so hold a validation set "
                       "out there"};
}

training_config read_training(object_reader r) {
  training_config t;
  t.batch_size = static_cast<int>(r.integer("batch_size", 128, 1, 1 << 20));
  t.epochs = static_cast<int>(r.integer("epochs", 10, 1, 1 << 20));
  t.max_steps = r.integer("max_steps", 0, 0);
  t.seed = static_cast<uint64_t>(r.integer("seed", 1, 0));
  t.partition = r.choice("data_partition", data_partition::shared,
                         {{"shared", data_partition::shared},
                          {"replicated", data_partition::replicated},
                          {"sharded", data_partition::sharded}});
  // Absent: 0, settled once the data section says how the set is read.
  t.shuffle_block = r.find("shuffle_block") != nullptr
                      ? r.integer("shuffle_block", 1, 1, int64_t{1} << 30)
                      : 0;
  if (auto* v = r.find("threads"); v != nullptr && v->is_string()) {
    if (v->get<std::string>() != "auto")
      fail(r.at("threads"), "an integer from 1 to 256 or \"auto\"", *v);
    t.threads = 0;
  } else {
    t.threads = static_cast<int>(r.integer("threads", 0, 1, 256));
  }
  t.device = read_device(r);
  t.log_every_steps = r.integer("log_every_steps", 100, 1);
  t.eval_every_steps = r.integer("eval_every_steps", 0, 0);
  if (auto* o = r.find("optimizer"))
    t.optimizer = read_optimizer(r.inner(*o, "optimizer"));
  if (auto* o = r.find("sparse_optimizer"))
    t.sparse_optimizer = read_sparse_optimizer(
      r.inner(*o, "sparse_optimizer"));
  if (auto* c = r.find("checkpoint")) {
    auto cr = r.inner(*c, "checkpoint");
    t.checkpoint.dir = cr.path("dir", "");
    if (t.checkpoint.dir.empty())
      throw config_error{errc::invalid_config, cr.at("dir"),
                         "missing required key \"dir\""};
    t.checkpoint.every_steps = cr.integer("every_steps", 0, 0);
    t.checkpoint.resume = cr.boolean("resume", true);
    t.checkpoint.keep = static_cast<int>(cr.integer("keep", 5, 0, 1 << 20));
    cr.finish();
  }
  r.finish();
  return t;
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
    cfg.model = read_model(r.inner(r.require("model"), "model"));
    cfg.data = read_data(r.inner(r.require("data"), "data"));
    if (auto* t = r.find("training"))
      cfg.training = read_training(r.inner(*t, "training"));
    if (auto* c = r.find("cluster"))
      cfg.cluster = read_cluster(r.inner(*c, "cluster"));
    r.finish();
    if (cfg.training.shuffle_block == 0)
      cfg.training.shuffle_block = cfg.data.stream_train ? streamed_block : 1;
    cfg.data.click_block = static_cast<size_t>(cfg.training.shuffle_block);
    check_click_run(cfg);
    check_external_run(cfg);
    check_targets(cfg);
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
  return parse_run_config(*text, path, config_folder(path));
}

int compute_threads(int configured, int workers_here) {
  if (configured > 0)
    return configured;
  const int cores
    = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, workers_here));
}

} // namespace troupe
