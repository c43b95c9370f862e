// Exports of the embedding tables for serving (training.export; the files
// are runtime/sparse/table_export.hpp's): the feeder paused until every
// lease is acked, as for a checkpoint, so that every shard is cut at one
// step; each table's rows changed since the last export and the keys
// evicted since, streamed from the shards piece by piece into its file;
// the dense parameters beside them; then the manifest, which names an
// export only once its files are durable. A shard's rows carry the push
// that last changed them, a clock its replica shares, so a replica that
// takes over cuts the next delta exactly where its primary would have.
#include <filesystem>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/table_file.hpp"

namespace troupe::chief_ops {

namespace {

/// One table's export under way: its file, each shard's cut, and what the
/// manifest will say of it.
struct table_export_job {
  std::shared_ptr<table_file_writer> w;
  int32_t table = 0;
  std::vector<row_chunk> heads; ///< per shard: rows cut, pushes, tombstones
};

/// What an export gathers as it goes, table after table.
struct export_job {
  feeder_position position;
  std::vector<shard_state_msg> parts;
  bool full = false;
  int64_t sequence = 0;
  double began = 0;
  uint64_t generation = 0;
  export_entry entry;
  std::vector<std::vector<int64_t>> pushes; ///< per table, per shard
};

const std::string& export_dir(chief_self self) {
  return self->state.opts.cfg.training.exports.dir;
}

/// Streams shard `part`'s cut rows from `first` on into `t`'s file, then
/// its tombstones, then the next shard's; `done` once the file is whole.
void stream_cut(chief_self self, std::shared_ptr<table_export_job> t,
                size_t part, uint64_t first,
                std::function<void(caf::error)> done,
                std::function<void()> lost) {
  if (part == t->heads.size())
    return done(t->w->finish());
  if (first >= t->heads[part].rows) {
    if (auto err = t->w->append_tombstones(part, t->heads[part].ids))
      return done(err);
    return stream_cut(self, t, part + 1, 0, done, lost);
  }
  auto gen = self->state.recovery.generation();
  ask_shard(self, part, export_atom_v, t->table, first, table_piece_rows)
    .then(
      [=](row_chunk& c) {
        table_piece piece;
        piece.part = part;
        piece.ids = std::move(c.ids);
        piece.values = std::move(c.values);
        auto n = piece.ids.size();
        if (n == 0)
          return done(make_error(errc::layout_mismatch,
                                 "shard " + std::to_string(part)
                                   + " answered no rows of its export cut"));
        if (auto err = t->w->append(piece))
          return done(err);
        stream_cut(self, t, part, first + n, done, lost);
      },
      [=](caf::error& err) {
        if (self->state.recovery.stale(gen))
          return lost();
        done(std::move(err));
      });
}

/// Exports table `table` and the ones after it, then `done`.
void export_table(chief_self self, std::shared_ptr<export_job> job,
                  size_t table, std::function<void(caf::error)> done,
                  std::function<void()> lost) {
  auto setups = embedding_tables(self->state.opts.cfg);
  if (table == setups.size())
    return done(caf::none);
  auto& st = self->state;
  auto t = static_cast<int32_t>(table);
  auto shards = st.shards.count();
  std::vector<int64_t> since(shards, -1);
  if (!job->full)
    since = st.exports.since[table];
  auto gen = st.recovery.generation();
  ask_all<row_chunk>(
    shards,
    [=](size_t s) { return ask_shard(self, s, export_atom_v, t, since[s]); },
    [=](std::vector<row_chunk>& heads) {
      auto& setup = setups[table];
      table_file_info info;
      info.table = setup.table.name;
      info.dim = setup.table.dim;
      info.vocabulary = setup.table.vocabulary;
      info.optimizer = to_string(setup.optimizer.type);
      info.export_kind = job->full ? "full" : "delta";
      info.sequence = job->sequence;
      std::vector<int64_t> pushes;
      for (size_t s = 0; s < heads.size(); ++s) {
        info.part_rows.push_back(heads[s].rows);
        info.part_pushes.push_back(heads[s].pushes);
        info.part_evicted.push_back(heads[s].ids.size());
        if (!job->full)
          info.part_since.push_back(since[s]);
        job->entry.rows += heads[s].rows;
        job->entry.evicted += heads[s].ids.size();
      }
      auto name = export_table_name(job->sequence, setup.table.name);
      auto w = table_file_writer::create(export_dir(self) + "/" + name, info);
      if (!w)
        return done(w.error());
      job->entry.tables[setup.table.name] = name;
      job->pushes.push_back(info.part_pushes);
      auto writing = std::make_shared<table_export_job>();
      writing->w = std::move(*w);
      writing->table = t;
      writing->heads = std::move(heads);
      stream_cut(
        self, writing, 0, 0,
        [=](caf::error err) {
          if (err)
            return done(std::move(err));
          std::error_code ec;
          auto bytes = std::filesystem::file_size(export_dir(self) + "/" + name,
                                                  ec);
          if (!ec)
            job->entry.bytes += bytes;
          export_table(self, job, table + 1, done, lost);
        },
        lost);
    },
    [=](caf::error& err) {
      if (self->state.recovery.stale(gen))
        return lost();
      done(std::move(err));
    });
}

/// Removes the files of the chains before the `keep` newest (a chain: a
/// full export and the deltas after it) from the manifest and the folder.
void prune_chains(chief_self self) {
  auto& m = self->state.exports.manifest;
  int keep = self->state.opts.cfg.training.exports.keep;
  size_t cut = m.exports.size();
  int fulls = 0;
  while (cut > 0 && fulls < keep)
    if (m.exports[--cut].kind == "full")
      ++fulls;
  if (fulls < keep || cut == 0)
    return;
  for (size_t i = 0; i < cut; ++i) {
    auto& e = m.exports[i];
    std::error_code ec; // a file already gone is what was wanted
    if (!e.dense.empty())
      std::filesystem::remove(export_dir(self) + "/" + e.dense, ec);
    for (auto& [table, file] : e.tables)
      std::filesystem::remove(export_dir(self) + "/" + file, ec);
  }
  m.exports.erase(m.exports.begin(),
                  m.exports.begin() + static_cast<long>(cut));
}

/// The tables are written: the dense file, then the manifest names them.
caf::error finish_export(chief_self self, export_job& job) {
  auto& st = self->state;
  auto dense = dense_checkpoint_of(self, job.position, job.parts);
  if (!dense)
    return dense.error();
  auto name = export_dense_name(job.sequence);
  std::string tables;
  for (auto& [table, file] : job.entry.tables)
    tables += (tables.empty() ? "" : ",") + file;
  dense->metadata["tables"] = tables;
  dense->metadata["export"] = job.full ? "full" : "delta";
  dense->metadata["sequence"] = std::to_string(job.sequence);
  // What a key its table lacks reads as (troupe-predict --export scores
  // as the run's evaluation did): its initial row, or zeros with
  // admission. A click model's one table; an external model's first.
  auto& first = embedding_tables(st.opts.cfg).front().table;
  dense->metadata["table_seed"] = std::to_string(first.seed);
  dense->metadata["table_init_scale"] = fmt("%.17g", first.init_scale);
  dense->metadata["absent_rows"] = first.admit.type != row_admission::kind::all
                                     ? "zeros"
                                     : "initial";
  if (auto err = write_checkpoint(export_dir(self) + "/" + name, *dense))
    return err;
  auto& e = job.entry;
  e.sequence = job.sequence;
  e.kind = job.full ? "full" : "delta";
  e.step = job.position.step;
  e.time = static_cast<double>(
             std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count())
           / 1000.0;
  e.dense = name;
  auto& ex = st.exports;
  ex.manifest.exports.push_back(e);
  if (job.full)
    prune_chains(self);
  if (auto err = write_export_manifest(export_dir(self), ex.manifest)) {
    ex.manifest.exports.pop_back();
    return err;
  }
  ex.since = job.pushes;
  ex.full_next = false;
  ex.sequence = job.sequence + 1;
  ex.last = e;
  ex.last_written = now_seconds();
  ex.last_seconds = ex.last_written - job.began;
  say(self,
      fmt("step %lld: export %lld (%s: %llu rows, %llu evicted keys, "
          "%.1f MB; %.2f s)",
          static_cast<long long>(e.step), static_cast<long long>(e.sequence),
          e.kind.c_str(), static_cast<unsigned long long>(e.rows),
          static_cast<unsigned long long>(e.evicted),
          static_cast<double>(e.bytes) / 1e6, ex.last_seconds));
  return caf::none;
}

} // namespace

bool export_due(chief_self self) {
  auto& st = self->state;
  auto& cfg = st.opts.cfg.training.exports;
  // Not while one is written or the shards recover: a due export waits
  // for the next progress report (one, not one per report meanwhile).
  if (cfg.dir.empty() || st.exports.taking || st.recovery.recovering()
      || !has_tables(self))
    return false;
  if (cfg.every_steps > 0 && st.progress.steps() >= st.exports.next_step)
    return true;
  return cfg.every_seconds > 0
         && now_seconds() - st.exports.last_time >= cfg.every_seconds;
}

caf::error open_exports(chief_self self) {
  auto& dir = self->state.opts.cfg.training.exports.dir;
  if (dir.empty())
    return caf::none;
  auto m = read_export_manifest(dir);
  if (!m) {
    if (m.error().code() == static_cast<uint8_t>(errc::file_not_found))
      return caf::none;
    return make_error(static_cast<errc>(m.error().code()),
                      "/training/export/dir: " + describe(m.error()));
  }
  auto& ex = self->state.exports;
  ex.manifest = std::move(*m);
  if (!ex.manifest.exports.empty())
    ex.sequence = ex.manifest.exports.back().sequence + 1;
  ex.full_next = true;
  return caf::none;
}

void exports_start_over(chief_self self) {
  self->state.exports.full_next = true;
}

void export_now(chief_self self, std::function<void()> then) {
  auto& st = self->state;
  auto& cfg = st.opts.cfg.training.exports;
  if (cfg.dir.empty() || !has_tables(self))
    return then();
  if (st.exports.taking || st.checkpoints.taking
      || st.recovery.recovering()) { // the feeder is someone else's now
    auto again = [=] { export_now(self, then); };
    if (st.recovery.recovering())
      st.recovery.when_over(again);
    else
      st.checkpoints.waiters.push_back(again);
    return;
  }
  st.exports.taking = true;
  // The next one is due an interval on, whatever becomes of this one.
  st.exports.last_time = now_seconds();
  if (cfg.every_steps > 0)
    st.exports.next_step = st.progress.steps() + cfg.every_steps;
  auto job = std::make_shared<export_job>();
  job->began = now_seconds();
  job->full = st.exports.full_next;
  job->sequence = st.exports.sequence;
  auto finished = [=] {
    auto& s = self->state;
    s.exports.taking = false;
    if (!s.progress.user_paused())
      self->send(s.shards.feeder, resume_atom_v);
    s.checkpoints.wake_waiters();
    then();
  };
  // A shard lost meanwhile: nothing of this export is named. A replica
  // that takes over continues the chain; rows put back from a checkpoint
  // start a new one (restore_tables).
  auto lost = [=] {
    self->state.exports.taking = false;
    self->state.checkpoints.wake_waiters();
    then();
  };
  auto failed = [=](caf::error err) {
    // The files of an export the manifest does not name are never read;
    // the run goes on, and the next export starts a new chain.
    say(self, "export " + std::to_string(job->sequence)
                + " failed: " + to_string(err) + "; the next one is full");
    exports_start_over(self);
    finished();
  };
  self->request(st.shards.feeder, timeout_of(self), pause_atom_v)
    .then(
      [=](feeder_position& position) {
        auto& s = self->state;
        if (s.recovery.recovering())
          return lost();
        job->position = position;
        std::error_code ec; // a failure shows in the writes' own errors
        std::filesystem::create_directories(export_dir(self), ec);
        ask_all_shards<shard_state_msg>(
          self, [=](size_t i) { return ask_shard(self, i, snapshot_atom_v); },
          [=](std::vector<shard_state_msg>& parts) {
            job->parts = std::move(parts);
            export_table(
              self, job, 0,
              [=](caf::error err) {
                if (!err)
                  err = finish_export(self, *job);
                if (err)
                  return failed(std::move(err));
                finished();
              },
              lost);
          },
          lost);
      },
      [=](caf::error& err) { failed(std::move(err)); });
}

} // namespace troupe::chief_ops
