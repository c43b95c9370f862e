#include "tests/fuzz/reader_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/rules/batch_plan.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/declared_params.hpp"
#include "runtime/checkpoint/safetensors_file.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/data/click_stream.hpp"
#include "runtime/sparse/table_file.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"
#include "tests/fuzz/reader_scratch.hpp"
#include "runtime/config/run_identity.hpp"

namespace troupe::fuzz {

namespace {

/// An input cut into two files as read_idx and read_cifar describe.
struct two_files {
  uint8_t flags = 0;
  const uint8_t* first = nullptr;
  size_t first_size = 0;
  const uint8_t* second = nullptr;
  size_t second_size = 0;
};

two_files split(const uint8_t* data, size_t size) {
  two_files out;
  out.flags = size > 0 ? data[0] : 0;
  size_t at = size > 2 ? (size_t{data[1]} << 8) | data[2] : 0;
  const uint8_t* body = data + std::min<size_t>(size, 3);
  size_t body_size = size > 3 ? size - 3 : 0;
  at = std::min(at, body_size);
  out.first = body;
  out.first_size = at;
  out.second = body + at;
  out.second_size = body_size - at;
  return out;
}

/// Sizes and labels agree; every value is in [0, 1] (images) or finite
/// (features taken as they are).
std::string pixels_broken(const dataset& d, bool unit_range = true) {
  if (d.features.rows() != d.count
      || d.features.sample_values() != d.sample_size())
    return "features are not count x sample_size";
  if (d.labels.size() != static_cast<size_t>(d.count))
    return "labels.size() != count";
  if (d.classes < 1 || d.classes > max_classes)
    return "classes outside [1, max_classes]";
  for (auto l : d.labels)
    if (l < 0 || l >= d.classes)
      return "a label outside [0, classes)";
  auto values = d.features.to_floats();
  for (auto x : values)
    if (unit_range ? !(x >= 0.f && x <= 1.f) : !std::isfinite(x))
      return unit_range ? "a pixel outside [0, 1]" : "a value not finite";
  return {};
}

std::string config_broken(const run_config& cfg) {
  auto m = training_identity(cfg);
  if (parse_identity(identity_text(m)) != m)
    return "the training identity does not survive identity_text and "
           "parse_identity";
  if (identity_digest(m).size() != 16)
    return "an identity digest that is not 16 hex digits";
  auto& c = cfg.cluster;
  if (c.shards < 1 || c.workers < 1 || c.aggregate() > c.workers)
    return "cluster counts out of range";
  if (c.connection_timeout_ms <= c.heartbeat_interval_ms)
    return "connection timeout not above the heartbeat interval";
  if (c.distributed()) {
    if (c.node(c.chief_node) == nullptr)
      return "a chief that is not a node";
    int shards = 0, workers = 0;
    for (auto& n : c.nodes) {
      shards += n.shards;
      workers += n.workers;
    }
    if (shards != c.shards || workers != c.workers)
      return "cluster counts that are not the nodes' sums";
  }
  auto& d = cfg.data;
  if (d.format == data_config::kind::synthetic) {
    auto per_sample = static_cast<uint64_t>(d.height) * d.width * d.channels;
    auto n = static_cast<uint64_t>(std::max(d.train_samples, d.test_samples));
    if (per_sample == 0 || n == 0 || n > (uint64_t{1} << 30) / per_sample)
      return "synthetic data beyond 2^30 values";
  }
  if (cfg.model.hidden.size() > 64)
    return "more than 64 hidden layers";
  for (auto h : cfg.model.hidden)
    if (h < 1 || h > (1 << 16))
      return "a hidden layer size outside [1, 2^16]";
  return {};
}

outcome parse_config(const std::string& text, const std::string& origin) {
  outcome o;
  o.names = origin;
  auto cfg = parse_run_config(text, origin);
  if (!cfg)
    o.errors.push_back(describe(cfg.error()));
  else
    o.broken = config_broken(*cfg);
  return o;
}

} // namespace

outcome read_config(const uint8_t* data, size_t size) {
  return parse_config(std::string(reinterpret_cast<const char*>(data), size),
                      "fuzz.json");
}

outcome read_cluster_file(const uint8_t* data, size_t size) {
  std::string text = R"({"model": {"type": "softmax"},
 "data": {"format": "synthetic"},
 "cluster": )";
  text.append(reinterpret_cast<const char*>(data), size);
  text += "}";
  return parse_config(text, "fuzz-cluster.json");
}

/// Whether a read with compressed inputs inflated into a cache folder
/// (`cached`) gave what the read into memory gave: the same error, or the
/// same samples and labels; "" when it did, else what differs.
std::string cached_read_differs(const caf::expected<dataset>& memory,
                                const caf::expected<dataset>& cached) {
  if (!memory || !cached) {
    std::string a = memory ? "samples" : describe(memory.error());
    std::string b = cached ? "samples" : describe(cached.error());
    return a == b ? ""
                  : "read into memory: " + a
                      + "; inflated into a "
                        "cache: "
                      + b;
  }
  if (memory->count != cached->count
      || memory->sample_size() != cached->sample_size()
      || memory->labels != cached->labels || memory->targets != cached->targets
      || memory->features.to_floats() != cached->features.to_floats())
    return "inflated into a cache, other samples than read into memory";
  return "";
}

outcome read_idx(const uint8_t* data, size_t size) {
  auto& s = scratch::get();
  auto in = split(data, size);
  auto images = s.file("images-idx3-ubyte");
  auto labels = s.file("labels-idx1-ubyte");
  write_file(images, in.first, in.first_size, in.flags & 1);
  write_file(labels, in.second, in.second_size, in.flags & 2);
  outcome o;
  o.names = images.substr(0, images.rfind('/'));
  auto d = load_idx(images, labels, 10);
  o.broken = cached_read_differs(d, load_idx(images, labels, 10, true,
                                             s.empty_cache()));
  if (!o.broken.empty())
    return o;
  if (!d) {
    o.errors.push_back(describe(d.error()));
    return o;
  }
  if (d->count < 1 || d->height < 1 || d->height > 4096 || d->width < 1
      || d->width > 4096 || d->channels != 1 || d->classes != 10)
    o.broken = "IDX count or shape out of range";
  else
    o.broken = pixels_broken(*d);
  return o;
}

outcome read_cifar(const uint8_t* data, size_t size) {
  auto& s = scratch::get();
  auto in = split(data, size);
  std::vector<std::string> paths{s.file("data_batch_1.bin")};
  if (in.flags & 4) {
    paths.push_back(s.file("data_batch_2.bin"));
    write_file(paths[0], in.first, in.first_size, in.flags & 1);
    write_file(paths[1], in.second, in.second_size, in.flags & 2);
  } else {
    // One file: the whole body (the split point is not used).
    write_file(paths[0], in.first, in.first_size + in.second_size,
               in.flags & 1);
  }
  outcome o;
  o.names = paths[0].substr(0, paths[0].rfind('/'));
  auto d = load_cifar10(paths);
  if (!d) {
    o.errors.push_back(describe(d.error()));
    return o;
  }
  if (d->count < 1 || d->height != 32 || d->width != 32 || d->channels != 3
      || d->classes != 10)
    o.broken = "CIFAR-10 count or shape out of range";
  else
    o.broken = pixels_broken(*d);
  return o;
}

/// What a reader of features taken as they are (npy, npz, csv) did: its
/// error, or the invariants of what it read. `flat`: its samples are
/// 1 x F x 1 (CSV).
outcome features_outcome(const caf::expected<dataset>& d, std::string names,
                         const char* format, bool flat) {
  outcome o;
  o.names = std::move(names);
  if (!d) {
    o.errors.push_back(describe(d.error()));
    return o;
  }
  if (d->count < 1 || d->height < 1 || d->width < 1 || d->channels < 1
      || (flat && (d->height != 1 || d->channels != 1)))
    o.broken = std::string{format} + " count or shape out of range";
  else
    o.broken = pixels_broken(*d, false);
  return o;
}

outcome read_npy(const uint8_t* data, size_t size) {
  auto& s = scratch::get();
  auto in = split(data, size);
  auto features = s.file("features.npy");
  auto labels = s.file("labels.npy");
  write_file(features, in.first, in.first_size, false);
  write_file(labels, in.second, in.second_size, false);
  return features_outcome(load_npy(features, labels),
                          features.substr(0, features.rfind('/')), ".npy",
                          false);
}

outcome read_npz(const uint8_t* data, size_t size) {
  auto path = scratch::get().file("data.npz");
  write_file(path, data, size, false);
  auto d = load_npz(path, "x_train", "y_train");
  outcome o;
  o.broken = cached_read_differs(d, load_npz(path, "x_train", "y_train",
                                             target_kind::classes, true,
                                             scratch::get().empty_cache()));
  if (!o.broken.empty())
    return o;
  return features_outcome(d, path, ".npz", false);
}

outcome read_csv(const uint8_t* data, size_t size) {
  auto path = scratch::get().file("data.csv");
  write_file(path, data, size, false);
  return features_outcome(load_csv(path, "label"), path, "CSV", true);
}

outcome read_click_log(const uint8_t* data, size_t size) {
  auto path = scratch::get().file("clicks.tsv");
  write_file(path, data, size, false);
  const click_schema schema{2, 3, 1000};
  outcome o;
  o.names = path;
  auto d = load_click_log(path, schema);
  // The streamed reader opens what the in-memory one reads, refuses what
  // it refuses with the same error, and reads the same samples in blocks
  // (of 3, in an epoch's order: cursors skip and the cache evicts).
  auto streamed = click_stream::open({path}, schema, 3, true);
  if (!d) {
    o.errors.push_back(describe(d.error()));
    if (streamed)
      o.broken = "click log: streamed, it opens what is refused in memory";
    else if (describe(streamed.error()) != o.errors.back())
      o.broken = "click log: streamed, another error: "
                 + describe(streamed.error());
    return o;
  }
  if (!streamed) {
    o.broken = "click log: streamed, refused: " + describe(streamed.error());
    return o;
  }
  if ((*streamed)->count() != d->count) {
    o.broken = "click log: streamed, another sample count";
    return o;
  }
  auto order = interleaved_order((*streamed)->part_sizes(), 1, 0, 3);
  for (size_t at = 0; at < order.size() && o.broken.empty(); at += 5) {
    auto m = static_cast<int>(std::min<size_t>(5, order.size() - at));
    auto got = (*streamed)->read(order.data() + at, m);
    if (!got) {
      o.broken = "click log: streamed, a read failed: " + describe(got.error());
      break;
    }
    for (int k = 0; k < m && o.broken.empty(); ++k) {
      auto i = static_cast<int64_t>(order[at + static_cast<size_t>(k)]);
      bool same = got->labels[static_cast<size_t>(k)]
                    == d->labels[static_cast<size_t>(i)]
                  && std::equal(d->numeric.begin() + i * 2,
                                d->numeric.begin() + i * 2 + 2,
                                got->numeric.begin() + k * 2);
      for (int f = 0; f < 3; ++f) {
        auto [a, ae] = d->field(i, f);
        auto [b, be] = got->field(k, f);
        same = same && std::equal(a, ae, b, be);
      }
      if (!same)
        o.broken = "click log: streamed, sample " + std::to_string(i)
                   + " differs";
    }
  }
  if (!o.broken.empty())
    return o;
  auto n = static_cast<size_t>(d->count);
  if (d->count < 1 || d->labels.size() != n || d->numeric.size() != 2 * n
      || d->offsets.size() != 3 * n + 1 || d->offsets.front() != 0
      || d->offsets.back() != d->ids.size())
    o.broken = "click log: counts out of step";
  else if (!std::is_sorted(d->offsets.begin(), d->offsets.end()))
    o.broken = "click log: offsets go back";
  else if (std::any_of(d->labels.begin(), d->labels.end(),
                       [](float y) { return y != 0.f && y != 1.f; }))
    o.broken = "click log: a label other than 0 or 1";
  else if (std::any_of(d->numeric.begin(), d->numeric.end(),
                       [](float x) { return !std::isfinite(x); }))
    o.broken = "click log: a numeric value that is not finite";
  else if (std::any_of(d->ids.begin(), d->ids.end(),
                       [](uint64_t id) { return id >= 1000; }))
    o.broken = "click log: an id outside the vocabulary";
  return o;
}

const std::vector<reader>& readers() {
  static const std::vector<reader> all{
    {"config", read_config},
    {"cluster_file", read_cluster_file},
    {"idx", read_idx},
    {"cifar", read_cifar},
    {"safetensors", read_safetensors},
    {"npy", read_npy},
    {"npz", read_npz},
    {"csv", read_csv},
    {"feeder_plan", read_feeder_plan},
    {"click_log", read_click_log},
    {"table_file", read_table_file},
  };
  return all;
}

void run_or_trap(outcome (*read)(const uint8_t*, size_t), const uint8_t* data,
                 size_t size) {
  auto o = read(data, size);
  if (!o.broken.empty()) {
    std::fprintf(stderr,
                 "troupe fuzz: a successful read broke an "
                 "invariant: %s\n",
                 o.broken.c_str());
    __builtin_trap();
  }
}

} // namespace troupe::fuzz
