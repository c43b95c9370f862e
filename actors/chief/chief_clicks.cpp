// The chief's side of a click model: scoring it needs the rows of the
// scored samples, which live on the shards, so an evaluation pulls them
// batch by batch (as a worker pulls its batch's rows) instead of reading
// one flat parameter vector; and a checkpoint streams the table between
// the shards and its own file piece by piece.
#include <cmath>
#include <numeric>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "models/click_batch.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/table_file.hpp"

namespace troupe::chief_ops {

namespace {

/// Samples scored per round of row pulls: a few tens of thousands of rows
/// per shard at most.
constexpr int64_t eval_batch = 8192;

/// One evaluation in flight.
struct click_eval {
  std::shared_ptr<const train_test> keep; ///< holds `data` alive
  const dataset* data = nullptr;
  std::unique_ptr<click_batch> batch;
  std::vector<double> p; ///< click probability per sample
  std::vector<uint32_t> idx;
  std::vector<float> logits;
  std::function<void(eval_result, double)> done;
  std::function<void()> lost;
};

void finish(const std::shared_ptr<click_eval>& e) {
  auto& labels = e->data->clicks->labels;
  eval_result r;
  r.count = e->data->count;
  r.loss = log_loss(e->p, labels);
  int64_t hits = 0;
  for (size_t i = 0; i < e->p.size(); ++i)
    hits += (e->p[i] > 0.5) == (labels[i] > 0.5f);
  r.accuracy = r.count > 0
                 ? static_cast<double>(hits) / static_cast<double>(r.count)
                 : 0;
  e->done(r, roc_auc(e->p, labels));
}

/// Scores samples [first, first + eval_batch), then goes on.
void score_from(chief_self self, std::shared_ptr<click_eval> e, int64_t first) {
  auto count = e->data->count;
  if (first >= count)
    return finish(e);
  auto n = static_cast<int>(std::min(eval_batch, count - first));
  e->idx.resize(static_cast<size_t>(n));
  std::iota(e->idx.begin(), e->idx.end(), static_cast<uint32_t>(first));
  e->batch->plan(*e->data->clicks, e->data->features.contiguous_floats(),
                 e->idx.data(), n);
  const auto dim = static_cast<size_t>(self->state.opts.cfg.model.table.dim);
  ask_all_shards<row_block>(
    self,
    [=](size_t i) {
      auto shard = static_cast<int32_t>(i);
      return ask_shard(self, i, pull_atom_v,
                       row_request{shard, 0, -1, e->batch->ids(shard), true});
    },
    [=](std::vector<row_block>& blocks) {
      for (size_t i = 0; i < blocks.size(); ++i) {
        auto shard = static_cast<int32_t>(i);
        auto want = e->batch->ids(shard).size() * dim;
        auto got = blocks[i].values ? blocks[i].values->size() : 0;
        if (got != want)
          return fail_run(
            self, make_error(errc::wrong_size,
                             "shard " + std::to_string(i) + " answered "
                               + std::to_string(got) + " floats of rows for "
                               + std::to_string(want)));
        if (want > 0)
          e->batch->set_rows(shard, blocks[i].values->data());
      }
      e->logits.resize(static_cast<size_t>(n) * 2);
      self->state.eval.evaluator->logits(e->batch->inputs(), n,
                                         e->logits.data());
      for (int s = 0; s < n; ++s)
        e->p[static_cast<size_t>(first + s)] = click_probability(
          e->logits.data() + 2 * static_cast<size_t>(s));
      score_from(self, e, first + n);
    },
    e->lost);
}

/// Asks shard `part` for its rows from `first` on, appends them as the
/// file's next piece, and goes on with the next piece or part.
void write_piece(chief_self self, std::shared_ptr<table_file_writer> w,
                 std::vector<uint64_t> rows, size_t part, uint64_t first,
                 std::function<void(caf::error)> done,
                 std::function<void()> lost) {
  while (part < rows.size() && first >= rows[part]) {
    ++part;
    first = 0;
  }
  if (part == rows.size())
    return done(w->finish());
  auto gen = self->state.recovery.generation();
  self
    ->request(self->state.shards.handles()[part], timeout_of(self),
              snapshot_atom_v, int32_t{0}, first, table_piece_rows)
    .then(
      [=](row_chunk& c) {
        table_piece piece;
        piece.part = part;
        piece.ids = std::move(c.ids);
        piece.values = std::move(c.values);
        piece.slots = std::move(c.slots);
        auto n = piece.ids.size();
        if (auto err = w->append(piece))
          return done(err);
        write_piece(self, w, rows, part, first + n, done, lost);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.recovery.stale(gen))
          return lost();
        done(std::move(err));
      });
}

/// A table being put back from its file: the reader and what every piece
/// needs, shared by the lanes that carry pieces to the shards.
struct table_restore {
  std::shared_ptr<table_file_reader> reader;
  std::vector<int64_t> pushes;
  std::function<void(caf::error)> done;
  int lanes = 0;     ///< lanes still carrying pieces
  caf::error failed; ///< the first error; the other lanes stop at it
};

/// Pieces a restore keeps in flight. Two let the chief read and split the
/// next piece while the shards insert the last one's rows: a piece at a
/// time left one of them idle (51M rows: 70 s with one lane).
constexpr int restore_lanes = 2;

/// One lane: reads the next piece of the file, sends each shard the rows
/// it holds now, and once every shard has them, goes on; the last lane
/// to find the file's end (or an error) calls `done`.
void restore_lane(chief_self self, std::shared_ptr<table_restore> t) {
  auto finish_lane = [t](caf::error err) {
    if (err && !t->failed)
      t->failed = std::move(err);
    if (--t->lanes == 0)
      t->done(t->failed);
  };
  if (t->failed)
    return finish_lane(caf::none);
  table_piece piece;
  auto more = t->reader->next(piece);
  if (!more)
    return finish_lane(more.error());
  if (!*more)
    return finish_lane(caf::none);
  auto chunks = std::make_shared<std::vector<row_chunk>>(
    spread_rows(piece.ids, piece.values, piece.slots,
                static_cast<size_t>(t->reader->info().dim), t->pushes));
  ask_all<uint64_t>(
    chunks->size(),
    [=](size_t i) {
      return ask_shard(self, i, restore_atom_v, std::move((*chunks)[i]));
    },
    [=](std::vector<uint64_t>&) { restore_lane(self, t); },
    [=](caf::error& err) { finish_lane(std::move(err)); });
}

/// Sends the rows of `r`'s pieces to the shards that hold them now, a few
/// pieces in flight, then `done`.
void restore_pieces(chief_self self, std::shared_ptr<table_file_reader> r,
                    std::vector<int64_t> pushes,
                    std::function<void(caf::error)> done) {
  auto t = std::make_shared<table_restore>();
  t->reader = std::move(r);
  t->pushes = std::move(pushes);
  t->done = std::move(done);
  t->lanes = restore_lanes;
  for (int lane = 0; lane < restore_lanes; ++lane)
    restore_lane(self, t);
}

} // namespace

std::vector<row_chunk> spread_rows(const std::vector<uint64_t>& ids,
                                   const std::vector<float>& values,
                                   const std::vector<std::vector<float>>& slots,
                                   size_t dim,
                                   const std::vector<int64_t>& pushes) {
  auto shards = static_cast<int32_t>(pushes.size());
  // Each shard's share, with room for a little imbalance.
  const auto share = ids.size() / pushes.size() * 9 / 8;
  std::vector<row_chunk> chunks(pushes.size());
  for (int32_t s = 0; s < shards; ++s) {
    auto& c = chunks[static_cast<size_t>(s)];
    c.shard = s;
    c.pushes = pushes[static_cast<size_t>(s)];
    c.ids.reserve(share);
    c.values.reserve(share * dim);
    c.slots.resize(slots.size());
    for (auto& slot : c.slots)
      slot.reserve(share * dim);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    auto& c = chunks[static_cast<size_t>(shard_of_row(ids[i], shards))];
    c.ids.push_back(ids[i]);
    auto row = [&](const std::vector<float>& v) {
      return v.begin() + static_cast<ptrdiff_t>(i * dim);
    };
    c.values.insert(c.values.end(), row(values),
                    row(values) + static_cast<ptrdiff_t>(dim));
    for (size_t k = 0; k < slots.size(); ++k)
      c.slots[k].insert(c.slots[k].end(), row(slots[k]),
                        row(slots[k]) + static_cast<ptrdiff_t>(dim));
  }
  return chunks;
}

void write_tables(chief_self self, const std::string& path,
                  std::function<void(caf::error)> done,
                  std::function<void()> lost) {
  ask_all_shards<row_chunk>(
    self,
    [=](size_t i) {
      return ask_shard(self, i, snapshot_atom_v, int32_t{0}, uint64_t{0},
                       uint64_t{0});
    },
    [=](std::vector<row_chunk>& heads) {
      auto& cfg = self->state.opts.cfg;
      table_file_info info;
      info.table = cfg.model.table.name;
      info.dim = cfg.model.table.dim;
      info.vocabulary = cfg.model.table.vocabulary;
      info.optimizer = to_string(cfg.training.sparse_optimizer.type);
      info.slots = sparse_table{embedding_table_config{},
                                cfg.training.sparse_optimizer}
                     .slot_names();
      for (auto& h : heads) {
        info.part_rows.push_back(h.rows);
        info.part_pushes.push_back(h.pushes);
      }
      auto w = table_file_writer::create(path, info);
      if (!w)
        return done(w.error());
      write_piece(self, std::shared_ptr<table_file_writer>(std::move(*w)),
                  info.part_rows, 0, 0, done, lost);
    },
    lost);
}

void restore_tables(chief_self self, const checkpoint& ckpt,
                    std::function<void(caf::error)> done) {
  auto it = ckpt.metadata.find("tables");
  if (!has_tables(self) || it == ckpt.metadata.end())
    return done(caf::none);
  auto& cfg = self->state.opts.cfg;
  auto path = cfg.training.checkpoint.dir + "/" + it->second;
  if (it->second.empty() || it->second.find('/') != std::string::npos)
    return done(make_error(errc::bad_format,
                           "a checkpoint names its tables file \"" + it->second
                             + "\", not a file beside it"));
  auto r = table_file_reader::open(path);
  if (!r)
    return done(r.error());
  auto& info = (*r)->info();
  if (info.dim != cfg.model.table.dim
      || info.vocabulary != cfg.model.table.vocabulary
      || info.optimizer != to_string(cfg.training.sparse_optimizer.type))
    return done(make_error(errc::layout_mismatch,
                           path + ": a table of dim " + std::to_string(info.dim)
                             + ", vocabulary " + std::to_string(info.vocabulary)
                             + " and " + info.optimizer + ", not this run's"));
  // Adam's bias correction counts a shard's pushes: the same shards get
  // their own counts back; re-spread rows the most any shard had.
  auto shards = self->state.shards.count();
  std::vector<int64_t> pushes(shards, 0);
  int64_t most = 0;
  for (auto p : info.part_pushes)
    most = std::max(most, p);
  for (size_t s = 0; s < shards; ++s)
    pushes[s] = info.part_pushes.size() == shards ? info.part_pushes[s] : most;
  // What a resume or a recovery waits on before training goes on.
  uint64_t rows = 0;
  for (auto n : info.part_rows)
    rows += n;
  auto began = now_seconds();
  auto said = [=, done = std::move(done)](caf::error err) {
    if (!err)
      say(self, fmt("tables restored: %llu rows from %s (%.1f s)",
                    static_cast<unsigned long long>(rows), path.c_str(),
                    now_seconds() - began));
    done(std::move(err));
  };
  restore_pieces(self, std::shared_ptr<table_file_reader>(std::move(*r)),
                 pushes, std::move(said));
}

bool has_tables(chief_self self) {
  return self->state.opts.cfg.model.type == model_config::kind::click;
}

void evaluate_clicks(chief_self self, const dataset& data,
                     std::function<void(eval_result, double auc)> done,
                     std::function<void()> lost) {
  auto& st = self->state;
  auto& cfg = st.opts.cfg;
  auto e = std::make_shared<click_eval>();
  e->keep = st.opts.data;
  e->data = &data;
  e->batch = std::make_unique<click_batch>(
    cfg.data.click_numeric, cfg.model.table_fields, cfg.model.table.dim,
    static_cast<int32_t>(st.shards.count()));
  e->p.assign(static_cast<size_t>(data.count), 0.5);
  e->done = std::move(done);
  e->lost = std::move(lost);
  score_from(self, std::move(e), 0);
}

} // namespace troupe::chief_ops
