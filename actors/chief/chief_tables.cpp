// A run's embedding tables in checkpoints: each table streamed between the
// shards and a file of its own piece by piece (runtime/sparse/table_file.hpp
// names the files), so that the chief never holds a table in one buffer;
// a click model's one table and an external model's /model/tables alike.
#include <algorithm>
#include <tuple>
#include <utility>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/table_file.hpp"

namespace troupe::chief_ops {

namespace {

/// The file name in `path` (what a checkpoint's metadata names).
std::string name_of(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

/// The counters and hashes of each shard's admission filter of `table`
/// ({0, 0}: it admits every key or by probability, counting none).
std::pair<uint64_t, int> filter_shape(const embedding_table_config& table) {
  if (table.admit.type != row_admission::kind::min_count)
    return {0, 0};
  return {admission_filter::counters_for(table.admit.expected_keys,
                                         table.admit.false_positive),
          admission_filter::hashes_for(table.admit.expected_keys,
                                       table.admit.false_positive)};
}

/// What a table's file is written from: its writer, its table, the rows
/// of each part (shard) and each part's admission counters (0: none).
struct table_writing {
  std::shared_ptr<table_file_writer> w;
  int32_t table = 0;
  std::vector<uint64_t> rows;
  uint64_t counters = 0;
};

void write_piece(chief_self self, std::shared_ptr<const table_writing> t,
                 size_t part, uint64_t first,
                 std::function<void(caf::error)> done,
                 std::function<void()> lost);

/// Asks shard `part` for its admission counters from `first` on, appends
/// them as the file's next piece, and goes on with the next piece or the
/// next part's rows.
void write_counts(chief_self self, std::shared_ptr<const table_writing> t,
                  size_t part, uint64_t first,
                  std::function<void(caf::error)> done,
                  std::function<void()> lost) {
  if (first >= t->counters)
    return write_piece(self, t, part + 1, 0, done, lost);
  auto gen = self->state.recovery.generation();
  self
    ->request(self->state.shards.handles()[part], timeout_of(self),
              snapshot_atom_v, counts_atom_v, t->table, first,
              table_count_piece)
    .then(
      [=](key_counts& c) {
        if (c.total != t->counters || c.counts.empty())
          return done(make_error(
            errc::layout_mismatch,
            "shard " + std::to_string(part) + " has " + std::to_string(c.total)
              + " admission counters, not " + std::to_string(t->counters)));
        table_piece piece;
        piece.part = part;
        piece.counts = std::move(c.counts);
        piece.counts_first = first;
        auto n = piece.counts.size();
        if (auto err = t->w->append(piece))
          return done(err);
        write_counts(self, t, part, first + n, done, lost);
      },
      [=](caf::error& err) {
        if (self->state.recovery.stale(gen))
          return lost();
        done(std::move(err));
      });
}

/// Asks shard `part` for table `table`'s rows from `first` on, appends
/// them as the file's next piece, and goes on with the next piece, the
/// part's counts or the next part.
void write_piece(chief_self self, std::shared_ptr<const table_writing> t,
                 size_t part, uint64_t first,
                 std::function<void(caf::error)> done,
                 std::function<void()> lost) {
  auto& rows = t->rows;
  if (part < rows.size() && first >= rows[part])
    return write_counts(self, t, part, 0, done, lost);
  if (part == rows.size())
    return done(t->w->finish());
  auto table = t->table;
  auto w = t->w;
  auto gen = self->state.recovery.generation();
  self
    ->request(self->state.shards.handles()[part], timeout_of(self),
              snapshot_atom_v, table, first, table_piece_rows)
    .then(
      [=](row_chunk& c) {
        table_piece piece;
        piece.part = part;
        piece.ids = std::move(c.ids);
        piece.values = std::move(c.values);
        piece.slots = std::move(c.slots);
        piece.ages = std::move(c.ages);
        piece.uses = std::move(c.uses);
        auto n = piece.ids.size();
        if (auto err = w->append(piece))
          return done(err);
        write_piece(self, t, part, first + n, done, lost);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (st.recovery.stale(gen))
          return lost();
        done(std::move(err));
      });
}

/// Writes table `table` to its file, then the tables after it, then `done`.
void write_table(chief_self self, std::vector<std::string> paths, size_t table,
                 std::function<void(caf::error)> done,
                 std::function<void()> lost) {
  if (table == paths.size())
    return done(caf::none);
  auto t = static_cast<int32_t>(table);
  ask_all_shards<row_chunk>(
    self,
    [=](size_t i) {
      return ask_shard(self, i, snapshot_atom_v, t, uint64_t{0}, uint64_t{0});
    },
    [=](std::vector<row_chunk>& heads) {
      auto setup = embedding_tables(self->state.opts.cfg)[table];
      table_file_info info;
      info.table = setup.table.name;
      info.dim = setup.table.dim;
      info.vocabulary = setup.table.vocabulary;
      info.optimizer = to_string(setup.optimizer.type);
      info.slots =
        sparse_table{embedding_table_config{}, setup.optimizer}.slot_names();
      info.ages = setup.table.keeps_ages(); // as the shards' rows come
      std::tie(info.counters, info.hashes) = filter_shape(setup.table);
      for (auto& h : heads) {
        info.part_rows.push_back(h.rows);
        info.part_pushes.push_back(h.pushes);
      }
      auto w = table_file_writer::create(paths[table], info);
      if (!w)
        return done(w.error());
      auto writing = std::make_shared<table_writing>();
      writing->w = std::move(*w);
      writing->table = t;
      writing->rows = info.part_rows;
      writing->counters = info.counters;
      write_piece(
        self, std::move(writing), 0, 0,
        [=](caf::error err) {
          if (err)
            return done(std::move(err));
          write_table(self, paths, table + 1, done, lost);
        },
        lost);
    },
    lost);
}

/// A table being put back from its file: the reader and what every piece
/// needs, shared by the lanes that carry pieces to the shards.
struct table_restore {
  std::shared_ptr<table_file_reader> reader;
  int32_t table = 0;
  std::vector<int64_t> pushes;
  /// The file's admission counts fit this run's filters: they are added
  /// back (to the shard of the same number, or with another number of
  /// shards to every shard, where they add up).
  bool counts_fit = false;
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
  if (!piece.counts.empty()) {
    if (!t->counts_fit)
      return restore_lane(self, t);
    auto shards = t->pushes.size();
    auto& parts = t->reader->info().part_rows;
    auto one = parts.size() == shards;
    key_counts c;
    c.table = t->table;
    c.total = t->reader->info().counters;
    c.hashes = t->reader->info().hashes;
    c.first = piece.counts_first;
    c.counts = std::move(piece.counts);
    return ask_all<bool>(
      one ? 1 : shards,
      [=](size_t i) {
        auto to = one ? piece.part : i;
        auto part = c;
        part.shard = static_cast<int32_t>(to);
        return ask_shard(self, to, restore_atom_v, std::move(part));
      },
      [=](std::vector<bool>&) { restore_lane(self, t); },
      [=](caf::error& err) { finish_lane(std::move(err)); });
  }
  row_chunk rows;
  rows.ids = std::move(piece.ids);
  rows.values = std::move(piece.values);
  rows.slots = std::move(piece.slots);
  rows.ages = std::move(piece.ages);
  rows.uses = std::move(piece.uses);
  auto chunks = std::make_shared<std::vector<row_chunk>>(spread_rows(
    rows, static_cast<size_t>(t->reader->info().dim), t->pushes, t->table));
  ask_all<uint64_t>(
    chunks->size(),
    [=](size_t i) {
      return ask_shard(self, i, restore_atom_v, std::move((*chunks)[i]));
    },
    [=](std::vector<uint64_t>&) { restore_lane(self, t); },
    [=](caf::error& err) { finish_lane(std::move(err)); });
}

/// Sends the rows of `r`'s pieces (table `table`'s) to the shards that
/// hold them now, a few pieces in flight, then `done`.
void restore_pieces(chief_self self, std::shared_ptr<table_file_reader> r,
                    int32_t table, std::vector<int64_t> pushes, bool counts_fit,
                    std::function<void(caf::error)> done) {
  auto t = std::make_shared<table_restore>();
  t->reader = std::move(r);
  t->table = table;
  t->pushes = std::move(pushes);
  t->counts_fit = counts_fit;
  t->done = std::move(done);
  t->lanes = restore_lanes;
  for (int lane = 0; lane < restore_lanes; ++lane)
    restore_lane(self, t);
}

/// One table file to put back: its path, the file opened, and the table
/// it fills.
struct table_source {
  std::string path;
  std::shared_ptr<table_file_reader> reader;
  size_t table = 0;
};

/// Checks the file of `src` against its table's config and puts its rows
/// back; then the next source, then `done`.
void restore_table(chief_self self,
                   std::shared_ptr<std::vector<table_source>> sources,
                   size_t next, std::function<void(caf::error)> done) {
  if (next == sources->size())
    return done(caf::none);
  auto& src = (*sources)[next];
  auto path = src.path;
  auto setup = embedding_tables(self->state.opts.cfg)[src.table];
  auto& info = src.reader->info();
  auto optimizer = to_string(setup.optimizer.type);
  if (info.dim != setup.table.dim || info.vocabulary != setup.table.vocabulary
      || info.optimizer != optimizer)
    return done(make_error(errc::layout_mismatch,
                           path + ": table \"" + setup.table.name + "\" of dim "
                             + std::to_string(info.dim) + ", vocabulary "
                             + std::to_string(info.vocabulary) + " and "
                             + info.optimizer + ", not this run's dim "
                             + std::to_string(setup.table.dim) + ", vocabulary "
                             + std::to_string(setup.table.vocabulary) + " and "
                             + optimizer));
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
  // Admission counts go back to filters of the same size only: a run that
  // changed expected_keys or false_positive counts its keys anew.
  auto shape = filter_shape(setup.table);
  bool counts_fit = info.counters > 0
                    && shape == std::make_pair(info.counters, info.hashes);
  if (info.counters > 0 && shape.first > 0 && !counts_fit)
    say(self, fmt("table %s: the checkpoint's admission counts (%llu "
                  "counters, %d hashes) do not fit this run's filter: its "
                  "keys are counted anew",
                  setup.table.name.c_str(),
                  static_cast<unsigned long long>(info.counters), info.hashes));
  auto began = now_seconds();
  auto said = [=](caf::error err) {
    if (err)
      return done(std::move(err));
    say(self, fmt("tables restored: %llu rows from %s (%.1f s)",
                  static_cast<unsigned long long>(rows), path.c_str(),
                  now_seconds() - began));
    restore_table(self, sources, next + 1, done);
  };
  // Each shard's push count first, with no rows: the rows' ages count
  // back from it, and a shard that gets no row (a bounded table may hold
  // none after its pushes) still gets it.
  auto table = static_cast<int32_t>(src.table);
  ask_all<uint64_t>(
    shards,
    [=](size_t s) {
      row_chunk head;
      head.shard = static_cast<int32_t>(s);
      head.table = table;
      head.pushes = pushes[s];
      return ask_shard(self, s, restore_atom_v, std::move(head));
    },
    [=](std::vector<uint64_t>&) {
      restore_pieces(self, src.reader, table, pushes, counts_fit, said);
    },
    [=](caf::error& err) { said(std::move(err)); });
}

} // namespace

std::vector<row_chunk> spread_rows(const row_chunk& rows, size_t dim,
                                   const std::vector<int64_t>& pushes,
                                   int32_t table) {
  auto& ids = rows.ids;
  auto& values = rows.values;
  auto& slots = rows.slots;
  const bool aged = !rows.ages.empty() && rows.ages.size() == ids.size()
                    && rows.uses.size() == ids.size();
  auto shards = static_cast<int32_t>(pushes.size());
  // Each shard's share, with room for a little imbalance.
  const auto share = ids.size() / pushes.size() * 9 / 8;
  std::vector<row_chunk> chunks(pushes.size());
  for (int32_t s = 0; s < shards; ++s) {
    auto& c = chunks[static_cast<size_t>(s)];
    c.shard = s;
    c.table = table;
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
    if (aged) {
      c.ages.push_back(rows.ages[i]);
      c.uses.push_back(rows.uses[i]);
    }
  }
  return chunks;
}

bool has_tables(chief_self self) {
  return !embedding_tables(self->state.opts.cfg).empty();
}

std::vector<std::string> table_paths(chief_self self,
                                     const std::string& checkpoint_path) {
  auto& cfg = self->state.opts.cfg;
  // A click model's one file keeps the name its old checkpoints have.
  if (cfg.model.type == model_config::kind::click)
    return {tables_path_of(checkpoint_path)};
  std::vector<std::string> out;
  for (auto& t : cfg.model.tables)
    out.push_back(table_path_of(checkpoint_path, t.table.name));
  return out;
}

std::string tables_metadata(const std::vector<std::string>& paths) {
  std::string out;
  for (auto& p : paths)
    out += (out.empty() ? "" : ",") + name_of(p);
  return out;
}

void write_tables(chief_self self, const std::string& checkpoint_path,
                  std::function<void(caf::error)> done,
                  std::function<void()> lost) {
  write_table(self, table_paths(self, checkpoint_path), 0, std::move(done),
              std::move(lost));
}

void restore_tables(chief_self self, const checkpoint& ckpt,
                    std::function<void(caf::error)> done) {
  auto it = ckpt.metadata.find("tables");
  // Rows put back carry no push counts the export chain knows.
  exports_start_over(self);
  if (!has_tables(self) || it == ckpt.metadata.end())
    return done(caf::none);
  auto& cfg = self->state.opts.cfg;
  auto setups = embedding_tables(cfg);
  auto names = table_file_names(it->second);
  auto sources = std::make_shared<std::vector<table_source>>();
  std::vector<bool> filled(setups.size(), false);
  for (auto& name : names) {
    if (name.empty() || name.find('/') != std::string::npos)
      return done(
        make_error(errc::bad_format, "a checkpoint names its table file \""
                                       + name + "\", not a file beside it"));
    auto path = cfg.training.checkpoint.dir + "/" + name;
    auto r = table_file_reader::open(path);
    if (!r)
      return done(r.error());
    std::shared_ptr<table_file_reader> reader = std::move(*r);
    // A click model's one file fills its one table, whatever its name;
    // an external model's files name their tables.
    size_t table = 0;
    if (cfg.model.type != model_config::kind::click) {
      auto& held = reader->info().table;
      auto at = std::find_if(setups.begin(), setups.end(),
                             [&](const table_setup& s) {
                               return s.table.name == held;
                             });
      if (at == setups.end())
        return done(make_error(errc::layout_mismatch,
                               path + ": table \"" + held
                                 + "\", which this run's /model/tables "
                                   "does not declare"));
      table = static_cast<size_t>(at - setups.begin());
    }
    if (filled[table])
      return done(
        make_error(errc::bad_format, path + ": a second file of table \""
                                       + setups[table].table.name + "\""));
    filled[table] = true;
    sources->push_back(table_source{path, std::move(reader), table});
  }
  for (size_t t = 0; t < setups.size(); ++t)
    if (!filled[t])
      return done(make_error(errc::layout_mismatch,
                             "the checkpoint's tables (\"" + it->second
                               + "\") hold no file of table \""
                               + setups[t].table.name + "\""));
  restore_table(self, sources, 0, std::move(done));
}

} // namespace troupe::chief_ops
