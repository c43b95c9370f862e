// The readers of files troupe writes itself and reads back: a table's
// checkpoint file, the feeder's saved plan, safetensors checkpoints (the
// rest of reader_inputs.hpp's readers are in reader_inputs.cpp).
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
  workers.push_back(workers.empty()
                      ? 0
                      : *std::max_element(workers.begin(), workers.end()) + 1);
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
               "accepted: "
               + describe(err);
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

} // namespace troupe::fuzz
