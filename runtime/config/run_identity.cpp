#include "runtime/config/run_identity.hpp"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

#include <openssl/evp.h>

#include "runtime/base/number_text.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/params/optimizer.hpp"

namespace troupe {

namespace {

std::string num(double x) {
  return number_text(x, digits::decimal);
}

template <class T>
std::string list(const std::vector<T>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    std::ostringstream s;
    s << v[i];
    out += (i > 0 ? "," : "") + s.str();
  }
  return out + "]";
}

/// A row optimizer's settings under `at`.
void add_sparse_optimizer(identity_map& m, const std::string& at,
                          const sparse_optimizer_config& so) {
  m[at + "/type"] = to_string(so.type);
  m[at + "/learning_rate"] = num(so.learning_rate);
  if (so.type == sparse_optimizer_config::kind::adagrad)
    m[at + "/initial_accumulator"] = num(so.initial_accumulator);
  if (so.type == sparse_optimizer_config::kind::adam) {
    m[at + "/beta1"] = num(so.beta1);
    m[at + "/beta2"] = num(so.beta2);
    m[at + "/epsilon"] = num(so.epsilon);
  }
}

} // namespace

identity_map training_identity(const run_config& cfg) {
  identity_map m;
  auto& md = cfg.model;
  m["/model/type"] = to_string(md.type);
  m["/model/hidden"] = list(md.hidden);
  m["/model/activation"] = to_string(md.act);
  m["/model/init"] = std::to_string(static_cast<int>(md.init));
  m["/model/init_stddev"] = num(md.init_stddev);
  if (md.type == model_config::kind::cnn) {
    m["/model/conv_channels"] = list(md.conv_channels);
    m["/model/kernel_size"] = std::to_string(md.kernel_size);
  }
  if (md.type == model_config::kind::layers) {
    for (size_t i = 0; i < md.layers.size(); ++i)
      m["/model/layers/" + std::to_string(i)] = to_string(md.layers[i]);
    m["/model/loss"] = to_string(md.loss);
  }
  m["/model/seed"] = std::to_string(md.seed);
  if (md.type == model_config::kind::click) {
    m["/model/embedding/dim"] = std::to_string(md.table.dim);
    m["/model/embedding/rows"] = md.table.create
                                     == embedding_table_config::rows::fixed
                                   ? "fixed"
                                   : "on_touch";
    m["/model/embedding/init_scale"] = num(md.table.init_scale);
  }
  auto& d = cfg.data;
  m["/data/format"] = to_string(d.format);
  if (md.type == model_config::kind::external) {
    // The file's name, not its folder, as for datasets below; its tensors
    // are checked against a checkpoint's layout when resuming.
    auto slash = md.parameters.rfind('/');
    m["/model/parameters"] = slash == std::string::npos
                               ? md.parameters
                               : md.parameters.substr(slash + 1);
  }
  if (d.format == data_config::kind::external) {
    m["/data/train_samples"] = std::to_string(d.train_samples);
    m["/data/test_samples"] = std::to_string(d.test_samples);
  } else if (d.format == data_config::kind::synthetic) {
    m["/data/train_samples"] = std::to_string(d.train_samples);
    m["/data/test_samples"] = std::to_string(d.test_samples);
    m["/data/shape"] = list(std::vector<int>{d.height, d.width, d.channels});
    m["/data/classes"] = std::to_string(d.classes);
    m["/data/noise"] = num(d.noise);
    m["/data/seed"] = std::to_string(d.seed);
  } else {
    // File names, not folders: two hosts may keep a dataset in different
    // places.
    auto base = [](const std::string& p) {
      auto slash = p.rfind('/');
      return slash == std::string::npos ? p : p.substr(slash + 1);
    };
    std::vector<std::string> files;
    for (auto* f :
         {&d.train_images, &d.train_labels, &d.test_images, &d.test_labels})
      if (!f->empty())
        files.push_back(base(*f));
    for (auto* list : {&d.train_files, &d.train_label_files, &d.test_files,
                       &d.test_label_files})
      // A followed folder grows while the run goes on: its glob is the
      // set, whatever parts a node or a chief run again saw at its start.
      if (list == &d.train_files && d.follow)
        files.push_back(base(d.follow_glob));
      else
        for (auto& f : *list)
          files.push_back(base(f));
    if (d.format == data_config::kind::npz) {
      files.push_back(base(d.archive));
      for (auto& a : d.arrays)
        files.push_back(a);
    }
    m["/data/files"] = list(files);
    if (d.file_classes > 0)
      m["/data/classes"] = std::to_string(d.file_classes);
    if (d.format == data_config::kind::csv)
      m["/data/label_column"] = d.label_columns.size() == 1
                                  ? d.label_columns[0]
                                  : list(d.label_columns);
    if (d.format == data_config::kind::click) {
      if (d.stream_train) // only when set: its epochs' order is another
        m["/data/read"] = "stream";
      if (d.follow)
        m["/data/follow"] = "true";
      m["/data/numeric"] = std::to_string(d.click_numeric);
      m["/data/categorical"] = std::to_string(d.click_categorical);
      m["/data/vocabulary"] = std::to_string(d.click_vocabulary);
    }
  }
  // Only when set, as data_partition below.
  if (d.validation_split > 0) {
    m["/data/validation_split"] = num(d.validation_split);
    m["/data/validation_seed"] = std::to_string(d.validation_seed);
  }
  auto& t = cfg.training;
  m["/training/batch_size"] = std::to_string(t.batch_size);
  m["/training/seed"] = std::to_string(t.seed);
  // Only when set: checkpoints of runs from before the key keep their digest.
  if (t.partition != data_partition::shared)
    m["/training/data_partition"] = to_string(t.partition);
  if (t.shuffle_block != 1) // only when set, so older checkpoints still fit
    m["/training/shuffle_block"] = std::to_string(t.shuffle_block);
  if (t.stream_order) // likewise
    m["/training/order"] = "stream";
  if (md.type == model_config::kind::click)
    add_sparse_optimizer(m, "/training/sparse_optimizer", t.sparse_optimizer);
  // An external model's tables, only when it has some: the digest of a
  // run without them is what it was before tables existed.
  for (size_t i = 0; i < md.tables.size(); ++i) {
    auto at = "/model/tables/" + std::to_string(i);
    auto& tb = md.tables[i].table;
    m[at + "/name"] = tb.name;
    m[at + "/vocabulary"] = std::to_string(tb.vocabulary);
    m[at + "/dim"] = std::to_string(tb.dim);
    m[at + "/init_scale"] = num(tb.init_scale);
    add_sparse_optimizer(m, at + "/optimizer", md.tables[i].optimizer);
  }
  auto& o = t.optimizer;
  m["/training/optimizer/type"] = to_string(o.type);
  m["/training/optimizer/learning_rate"] = num(o.learning_rate);
  m["/training/optimizer/weight_decay"] = num(o.weight_decay);
  if (o.type == optimizer_config::kind::momentum) {
    m["/training/optimizer/momentum"] = num(o.momentum);
    m["/training/optimizer/nesterov"] = o.nesterov ? "true" : "false";
  }
  if (o.type == optimizer_config::kind::adam) {
    m["/training/optimizer/beta1"] = num(o.beta1);
    m["/training/optimizer/beta2"] = num(o.beta2);
    m["/training/optimizer/epsilon"] = num(o.epsilon);
  }
  m["/training/optimizer/schedule"] =
    o.schedule.type == lr_schedule::kind::constant
      ? std::string{"constant"}
      : "exponential " + num(o.schedule.decay_steps) + " "
          + num(o.schedule.decay_rate)
          + (o.schedule.staircase ? " staircase" : "");
  auto& c = cfg.cluster;
  m["/cluster/mode"] = to_string(c.consistency);
  switch (c.consistency) {
    case cluster_config::mode::sync:
      m["/cluster/replicas_to_aggregate"] = std::to_string(
        c.replicas_to_aggregate);
      break;
    case cluster_config::mode::ssp:
      m["/cluster/staleness"] = std::to_string(c.staleness);
      break;
    case cluster_config::mode::easgd:
      m["/cluster/tau"] = std::to_string(c.tau);
      m["/cluster/beta"] = num(c.beta);
      m["/cluster/moving_rate"] = num(c.moving_rate);
      break;
    default: break;
  }
  m["/cluster/shards"] = std::to_string(c.shards);
  m["/cluster/chief"] = c.chief_node;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    auto& n = c.nodes[i];
    m["/cluster/nodes/" + std::to_string(i)] =
      n.name + " " + n.host + ":" + std::to_string(n.port) + " shards "
      + std::to_string(n.shards) + " workers " + std::to_string(n.workers);
  }
  return m;
}

identity_map resume_identity(const identity_map& m) {
  identity_map out;
  int64_t workers = 0;
  bool any_node = false;
  const std::string nodes = "/cluster/nodes/", tag = " workers ";
  for (auto& [key, value] : m) {
    if (key.compare(0, nodes.size(), nodes) == 0) {
      // "name host:port shards S workers W"
      any_node = true;
      auto at = value.rfind(tag);
      if (at != std::string::npos)
        workers += std::strtoll(value.c_str() + at + tag.size(), nullptr, 10);
      continue;
    }
    if (key == "/cluster/shards" || key == "/cluster/chief")
      continue;
    out[key] = value;
  }
  if (any_node) // a cluster file's nodes (one process has none)
    out["/cluster/workers"] = std::to_string(workers);
  return out;
}

std::string identity_text(const identity_map& m) {
  std::string out;
  for (auto& [k, v] : m)
    out += k + "=" + v + "\n";
  return out;
}

identity_map parse_identity(const std::string& text) {
  identity_map m;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos)
      m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

std::string identity_digest(const identity_map& m) {
  auto text = identity_text(m);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 8 && i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

std::string identity_difference(const identity_map& a,
                                const std::string& a_name,
                                const identity_map& b,
                                const std::string& b_name, size_t max_keys) {
  std::string out;
  size_t named = 0, more = 0;
  auto add = [&](const std::string& key, const std::string& x,
                 const std::string& y) {
    if (named == max_keys) {
      ++more;
      return;
    }
    out += (named++ > 0 ? "; " : "") + key + " (" + a_name + ": " + x + ", "
           + b_name + ": " + y + ")";
  };
  // Keys both sides set first (the optimizer's type before the settings
  // only one of the two optimizers has).
  for (auto& [k, v] : a)
    if (auto it = b.find(k); it != b.end() && it->second != v)
      add(k, v, it->second);
  for (auto& [k, v] : a)
    if (b.count(k) == 0)
      add(k, v, "not set");
  for (auto& [k, v] : b)
    if (a.count(k) == 0)
      add(k, "not set", v);
  if (more > 0)
    out += "; and " + std::to_string(more) + " more";
  return out;
}

std::string new_run_id() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

std::optional<std::vector<int>> identity_int_list(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    return std::nullopt;
  std::vector<int> out;
  const char* p = text.c_str() + 1;
  while (*p != ']') {
    char* end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (end == p || v < 1 || v > (1 << 16))
      return std::nullopt;
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != ']')
      return std::nullopt;
  }
  return out;
}

} // namespace troupe
