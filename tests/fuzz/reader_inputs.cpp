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
#include "runtime/config/run_identity.hpp"

namespace troupe::fuzz {

namespace {

/// One folder per process, made on first use and emptied and removed at
/// exit. On tmpfs (/dev/shm) when there is one: every input writes files,
/// and a disk would make that the fuzzer's bottleneck. A process that
/// crashes leaves its folder behind (troupe-fuzz-XXXXXX).
class scratch {
public:
  static scratch& get() {
    static scratch s;
    return s;
  }

  /// The path of `name` in the folder; the name is removed at exit.
  std::string file(const std::string& name) {
    if (std::find(names_.begin(), names_.end(), name) == names_.end())
      names_.push_back(name);
    return dir_ + "/" + name;
  }

  /// An empty folder for inflated copies (runtime/data/inflated_cache.hpp),
  /// emptied at each call: an input's copy is never another input's, whose
  /// file may have the same size and modification time.
  std::string empty_cache() {
    auto dir = dir_ + "/cache";
    if (DIR* d = ::opendir(dir.c_str())) {
      while (auto* e = ::readdir(d))
        if (e->d_name[0] != '.')
          ::unlink((dir + "/" + e->d_name).c_str());
      ::closedir(d);
    }
    return dir;
  }

  ~scratch() {
    for (auto& n : names_)
      ::unlink((dir_ + "/" + n).c_str());
    empty_cache();
    ::rmdir((dir_ + "/cache").c_str());
    ::rmdir(dir_.c_str());
  }

private:
  scratch() {
    struct stat st;
    const char* env = std::getenv("TMPDIR");
    std::string base = env != nullptr && *env != '\0' ? env
                       : ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)
                         ? "/dev/shm"
                         : "/tmp";
    std::string tmpl = base + "/troupe-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("troupe fuzz: mkdtemp");
      std::abort(); // no folder, nothing to read
    }
    dir_ = tmpl;
  }

  std::string dir_;
  std::vector<std::string> names_;
};

/// Writes `n` bytes to `path`, through zlib's gzip writer when `gz`.
void write_file(const std::string& path, const uint8_t* data, size_t n,
                bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr)
      std::abort();
    if (n > 0)
      gzwrite(f, data, static_cast<unsigned>(n));
    gzclose(f);
    return;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0600);
  if (fd < 0)
    std::abort();
  while (n > 0) {
    auto w = ::write(fd, data, n);
    if (w <= 0)
      std::abort(); // tmpfs full: the run says nothing about the readers
    data += w;
    n -= static_cast<size_t>(w);
  }
  ::close(fd);
}

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

std::string checkpoint_broken(const checkpoint& c) {
  const size_t total = c.layout.total();
  if (c.step < 0 || c.layout.tensors().empty() || c.params.size() != total)
    return "a step below 0, no tensors, or params.size() != layout.total()";
  for (auto x : c.params)
    if (!std::isfinite(x))
      return "a parameter that is NaN or infinite";
  for (size_t i = 0; i < c.slots.size(); ++i) {
    auto& [name, values] = c.slots[i];
    if (name == "params" || values.size() != total)
      return "an optimizer slot named params or of the wrong size";
    for (size_t j = 0; j < i; ++j)
      if (c.slots[j].first == name)
        return "two optimizer slots of one name";
    for (auto x : values)
      if (!std::isfinite(x))
        return "an optimizer value that is NaN or infinite";
  }
  if (check_layout(c, c.layout, "self"))
    return "a layout that differs from itself";
  return {};
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size()
         && (a.empty()
             || std::memcmp(a.data(), b.data(), a.size() * sizeof(float))
                  == 0);
}

bool same_checkpoint(const checkpoint& a, const checkpoint& b) {
  if (a.step != b.step || a.metadata != b.metadata
      || a.layout.compare(b.layout) || !same_floats(a.params, b.params)
      || a.slots.size() != b.slots.size())
    return false;
  for (size_t i = 0; i < a.slots.size(); ++i)
    if (a.slots[i].first != b.slots[i].first
        || !same_floats(a.slots[i].second, b.slots[i].second))
      return false;
  return true;
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

outcome read_table_file(const uint8_t* data, size_t size) {
  auto path = scratch::get().file("ckpt-1.tables.safetensors");
  write_file(path, data, size, false);
  outcome o;
  o.names = path;
  auto r = table_file_reader::open(path);
  if (!r) {
    o.errors.push_back(describe(r.error()));
    return o;
  }
  auto& info = (*r)->info();
  const auto dim = static_cast<size_t>(info.dim);
  table_piece piece;
  for (;;) {
    auto more = (*r)->next(piece);
    if (!more) {
      o.errors.push_back(describe(more.error()));
      return o;
    }
    if (!*more)
      break;
    if (piece.part >= info.part_rows.size()
        || piece.values.size() != piece.ids.size() * dim
        || piece.slots.size() != info.slots.size())
      o.broken = "tables file: a piece out of step with its header";
    else if (std::any_of(piece.ids.begin(), piece.ids.end(),
                         [&](uint64_t id) { return id >= info.vocabulary; }))
      o.broken = "tables file: an id outside the vocabulary";
    if (!o.broken.empty())
      return o;
  }
  return o;
}

outcome read_feeder_plan(const uint8_t* data, size_t size) {
  outcome o;
  o.names = "feeder plan";
  if (size < 1)
    return o;
  auto mode = (data[0] & 1) != 0 ? data_partition::sharded
                                  : data_partition::replicated;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr size_t samples = 97;
  constexpr int epochs = 4;
  // The step a checkpoint would give: the text's own batch count.
  long long step = 0;
  char word[16] = {0};
  if (std::sscanf(text.c_str(), "troupe-plan 1 %15s %lld", word, &step) != 2)
    step = 0;
  batch_plan plan{samples, 10, 1, epochs, 0, mode};
  if (auto err = plan.restore(step, {}, text)) {
    o.errors.push_back(describe(err));
    return o;
  }
  auto saved = plan.save();
  batch_plan again{samples, 10, 1, epochs, 0, mode};
  if (auto err = again.restore(plan.position(), {}, saved)) {
    o.broken = "its own saved text does not load: " + describe(err);
    return o;
  }
  if (again.save() != saved) {
    o.broken = "its saved text does not load to itself";
    return o;
  }
  // Run the plan out: every worker it knows, and one more, lease and ack
  // in turn; a bounded number of rounds (the plan is at most 4 epochs of
  // 10 batches for each worker that has a stream).
  std::vector<int32_t> workers;
  for (size_t at = 0; (at = saved.find("stream ", at)) != std::string::npos;
       at += 7)
    workers.push_back(static_cast<int32_t>(std::atol(saved.c_str() + at + 7)));
  workers.push_back(workers.empty() ? 0 : *std::max_element(
                                            workers.begin(), workers.end())
                                            + 1);
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
  for (int round = 0; !plan.complete(); ++round) {
    if (round > 100000) {
      o.broken = "the plan does not end";
      return o;
    }
    for (auto w : workers)
      if (auto g = plan.lease(w)) {
        if (g->epoch < 0 || g->epoch >= epochs || g->samples.empty()) {
          o.broken = "a lease outside the plan";
          return o;
        }
        plan.ack(g->id);
      }
  }
  for (auto& w : plan.worker_samples())
    for (auto n : w.samples)
      if (n > static_cast<int64_t>(samples)) {
        o.broken = "a worker trained more than the set in one epoch";
        return o;
      }
  if (mode == data_partition::sharded)
    for (auto n : plan.epoch_samples())
      if (n > static_cast<int64_t>(samples)) {
        o.broken = "a sharded epoch trained more than the set";
        return o;
      }
  return o;
}

outcome read_safetensors(const uint8_t* data, size_t size) {
  auto& s = scratch::get();
  auto path = s.file("ckpt-1.safetensors");
  write_file(path, data, size, false);
  outcome o;
  o.names = path.substr(0, path.rfind('/'));
  auto head = read_checkpoint_metadata(path);
  if (!head)
    o.errors.push_back(describe(head.error()));
  // The same bytes as parameters a user declares (model.type "external").
  auto declared = read_declared_params(path);
  if (!declared)
    o.errors.push_back(describe(declared.error()));
  auto full = read_checkpoint(path);
  if (!full) {
    o.errors.push_back(describe(full.error()));
    return o;
  }
  // Every tensor of a checkpoint is one a user may declare (nonempty,
  // finite F32), unless its name holds a control character.
  bool plain_names = true;
  auto plain = [&](const std::string& name) {
    for (char c : name)
      plain_names &= static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  };
  for (auto& t : full->layout.tensors())
    plain(t.name);
  for (auto& slot : full->slots)
    plain(slot.first);
  auto floats = full->layout.total() * (1 + full->slots.size());
  // A checkpoint's list of buffers names its tensors without "params/",
  // which a declared file's list would name: such a file is no user's.
  bool lists_buffers = full->metadata.count(buffers_key) > 0;
  if (plain_names && !lists_buffers
      && (!declared || declared->layout.total() != floats)) {
    o.broken = "read_declared_params reads a checkpoint differently";
    return o;
  }
  if (!head || head->step != full->step || head->metadata != full->metadata) {
    o.broken = "read_checkpoint accepts what read_checkpoint_metadata "
               "refuses, or reads other metadata";
    return o;
  }
  if (o.broken = checkpoint_broken(*full); !o.broken.empty())
    return o;
  // What was read is a checkpoint: written again and read back, it must
  // come back the same.
  auto again_path = s.file("ckpt-2.safetensors");
  if (auto err = write_checkpoint(again_path, *full)) {
    o.broken = "write_checkpoint refuses a checkpoint read_checkpoint "
               "accepted: " + describe(err);
    return o;
  }
  auto again = read_checkpoint(again_path);
  if (!again)
    o.broken = "a rewritten checkpoint does not read: "
               + describe(again.error());
  else if (!same_checkpoint(*full, *again))
    o.broken = "a rewritten checkpoint reads differently";
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
    std::fprintf(stderr, "troupe fuzz: a successful read broke an "
                         "invariant: %s\n", o.broken.c_str());
    __builtin_trap();
  }
}

} // namespace troupe::fuzz
