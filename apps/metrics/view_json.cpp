#include "apps/metrics/view_json.hpp"

#include <algorithm>
#include <string>

// GCC 12 reports a false -Warray-bounds inside nlohmann::json (at -O2).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

using json = nlohmann::json;

json stream_json(const run_view& r) {
  if (r.stream_parts < 0)
    return nullptr;
  auto maybe = [](double x) { return x >= 0 ? json(x) : json(nullptr); };
  return {{"parts", r.stream_parts},
          {"waiting", r.stream_waiting},
          {"progressive_samples", r.progressive_samples},
          {"progressive_log_loss", maybe(r.progressive_loss)},
          {"parts_log_loss", maybe(r.parts_loss)},
          {"last_part",
           r.last_part.empty() ? json(nullptr) : json(r.last_part)},
          {"last_part_log_loss", maybe(r.last_part_loss)},
          {"last_part_auc", maybe(r.last_part_auc)}};
}

json export_json(const run_view& r) {
  if (r.export_sequence < 0)
    return nullptr;
  return {{"sequence", r.export_sequence}, {"kind", r.export_kind},
          {"step", r.export_step},         {"age_seconds", r.export_age},
          {"rows", r.export_rows},         {"evicted", r.export_evicted},
          {"bytes", r.export_bytes}};
}

json checkpoint_json(const run_view& r) {
  if (r.checkpoint_step < 0)
    return nullptr;
  return {{"step", r.checkpoint_step},
          {"age_seconds", r.checkpoint_age},
          {"took_seconds", r.checkpoint_took}};
}

json taken_over_json(const run_view& r) {
  if (!r.taken_over)
    return nullptr;
  return {{"from_step", r.taken_from_step},
          {"lost_steps",
           r.taken_lost_steps >= 0 ? json(r.taken_lost_steps) : json(nullptr)}};
}

json percent_done(const run_view& r) {
  if (r.total_steps <= 0)
    return nullptr;
  return std::min(100.0, 100.0 * static_cast<double>(r.steps)
                           / static_cast<double>(r.total_steps));
}

/// null for an empty string: a process that did not answer, a worker
/// that has not failed.
json text_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

caf::error no_such(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

} // namespace

json run_json(const run_view& r) {
  return {{"name", r.name},
          {"run_id", r.run_id},
          {"config_digest", r.config_digest},
          {"mode", r.mode},
          {"steps", r.steps},
          {"epoch", r.epoch},
          {"seconds", r.seconds},
          {"examples_per_sec", r.examples_per_sec},
          // null, not a -1 a script could average in, before the first
          // evaluation.
          {"test_accuracy",
           r.test_accuracy >= 0 ? json(r.test_accuracy) : json(nullptr)},
          {"total_steps", r.total_steps},
          {"percent_done", percent_done(r)},
          {"eta_seconds",
           r.eta_seconds >= 0 ? json(r.eta_seconds) : json(nullptr)},
          {"learning_rate", r.learning_rate},
          {"loss", r.loss >= 0 ? json(r.loss) : json(nullptr)},
          {"paused", r.paused},
          {"recovering", r.recovering},
          {"phase", r.phase},
          // null while the run goes on; "done" or "failed" in the view
          // the port keeps after it (view_poller::finish)
          {"outcome", text_or_null(r.outcome)},
          {"error", text_or_null(r.error)},
          {"stopping", r.stopping},
          {"restarts", r.restarts},
          {"shard_recoveries", r.shard_recoveries},
          {"lost_steps", r.lost_steps},
          // A run taken over from a lost chief: the checkpoint's step and
          // the steps that cost (null: not known, the shards died too).
          {"taken_over", taken_over_json(r)},
          {"last_checkpoint", r.last_checkpoint},
          // This chief's last: its step, age and pause (null: none yet).
          {"checkpoint", checkpoint_json(r)},
          // training.export: the last export (null: none yet).
          {"last_export", export_json(r)},
          // data.follow: the parts and the progressive validation (null:
          // the run follows no folder).
          {"stream", stream_json(r)}};
}

json nodes_json(const cluster_view& v) {
  json out = json::array();
  for (auto& n : v.nodes)
    out.push_back(
      {{"name", n.name},
       {"address", n.address},
       {"state", n.up ? "up" : "down"},
       {"chief", n.chief},
       {"joined", n.joined},
       {"shards", n.shards},
       {"workers", n.workers},
       // null: its process did not answer (down, or slow)
       {"resident_bytes",
        n.resident_bytes >= 0 ? json(n.resident_bytes) : json(nullptr)},
       {"heap_bytes", n.heap_bytes >= 0 ? json(n.heap_bytes) : json(nullptr)},
       {"cpu_seconds",
        n.cpu_seconds >= 0 ? json(n.cpu_seconds) : json(nullptr)},
       {"pid", n.pid >= 0 ? json(n.pid) : json(nullptr)},
       {"host", text_or_null(n.host)},
       {"program", text_or_null(n.program)},
       // seconds since the epoch; null: its process did not answer
       {"process_started",
        n.started_unix >= 0 ? json(n.started_unix) : json(nullptr)},
       // null: the chief never heard from it
       {"heard_seconds_ago",
        n.heard_age >= 0 ? json(n.heard_age) : json(nullptr)}});
  return out;
}

json worker_json(const worker_view& w) {
  return {{"id", "worker:" + std::to_string(w.id)},
          {"role", "worker"},
          {"node", w.node},
          {"state", w.state},
          {"step", w.step},
          {"clock", w.clock},
          {"samples", w.samples},
          {"examples_per_sec", w.examples_per_sec},
          {"staleness", w.staleness},
          {"mean_staleness", w.mean_staleness},
          {"loss", w.loss},
          {"restarts", w.restarts},
          {"pid", w.pid >= 0 ? json(w.pid) : json(nullptr)},
          {"host", text_or_null(w.host)},
          {"program", text_or_null(w.program)},
          {"last_error", text_or_null(w.last_error)}};
}

json shard_json(const shard_view& s) {
  json j{{"id", "shard:" + std::to_string(s.id)},
         {"role", "shard"},
         {"node", s.node},
         {"state", s.state},
         {"size", s.end - s.begin}};
  if (s.answered) {
    j["version"] = s.version;
    j["accepted"] = s.accepted;
    j["stale"] = s.stale;
    j["refused"] = s.refused;
    j["pulled_bytes"] = s.pulled_bytes;
    j["pushed_bytes"] = s.pushed_bytes;
    if (s.ssp_pulls >= 0) {
      j["ssp_pulls"] = s.ssp_pulls;
      j["ssp_max_lead"] = s.ssp_max_lead;
    }
    if (s.rows >= 0) {
      j["rows"] = s.rows;
      j["row_bytes"] = s.row_bytes;
      j["rows_pulled"] = s.rows_pulled;
      j["rows_pushed"] = s.rows_pushed;
      json tables = json::array();
      for (auto& t : s.tables)
        tables.push_back({{"name", t.name},
                          {"rows", t.rows},
                          {"row_bytes", t.row_bytes},
                          {"rows_pulled", t.rows_pulled},
                          {"rows_pushed", t.rows_pushed},
                          {"rows_made", t.rows_made},
                          {"rows_rejected", t.rows_rejected},
                          {"rows_evicted", t.rows_evicted},
                          {"filter_used", t.filter_used},
                          {"filter_counters", t.filter_counters}});
      if (!tables.empty())
        j["tables"] = tables;
    }
  }
  if (!s.replica.empty()) { // a run with shard_replicas
    j["replica_node"] = text_or_null(s.replica_node);
    j["replica"] = s.replica;
    if (s.answered) {
      j["replica_lag"] = s.replica_lag;
      j["replica_version"] = s.replica_version >= 0 ? json(s.replica_version)
                                                    : json(nullptr);
      j["replica_rows"] = s.replica_rows;
    }
  }
  return j;
}

json status_json(const cluster_view& v) {
  auto& r = v.run;
  json actors = json::array();
  actors.push_back({{"id", "chief"},
                    {"role", "chief"},
                    {"node", r.own_node},
                    {"state", r.stopping     ? "stopping"
                              : r.recovering ? "recovering"
                              : r.paused     ? "paused"
                                             : "training"},
                    {"step", r.steps},
                    {"examples_per_sec", r.examples_per_sec},
                    {"restarts", r.restarts}});
  actors.push_back({{"id", "feeder"},
                    {"role", "feeder"},
                    {"node", r.own_node},
                    {"state", r.paused ? "paused" : "leasing"}});
  for (auto& s : v.shards)
    actors.push_back(shard_json(s));
  for (auto& w : v.workers)
    actors.push_back(worker_json(w));
  return {{"run", run_json(r)}, {"actors", actors}};
}

caf::expected<json> inspect_json(const actor_ref& a, const cluster_view& v) {
  switch (a.role) {
    case actor_role::chief:
      return json{{"run", run_json(v.run)}, {"nodes", nodes_json(v)}};
    case actor_role::feeder:
      if (!v.feeder.answered)
        return no_such("the feeder did not answer");
      return json{{"id", "feeder"},
                  {"acked", v.feeder.acked},
                  {"position", v.feeder.position},
                  {"epoch_samples", v.feeder.epoch_samples},
                  {"paused", v.run.paused}};
    case actor_role::worker:
      for (auto& w : v.workers)
        if (w.id == a.index) {
          auto j = worker_json(w);
          j["compute_seconds"] = w.compute_seconds;
          // Reading its samples: the time its steps waited on it (what
          // read-ahead did not hide) and the bytes read.
          j["read_seconds"] = w.read_seconds;
          j["read_bytes"] = w.read_bytes;
          j["read_share"] = w.compute_seconds > 0
                              ? w.read_seconds / w.compute_seconds
                              : 0.0;
          j["read_mb_per_sec"] = w.read_seconds > 0
                                   ? static_cast<double>(w.read_bytes) / 1e6
                                       / w.read_seconds
                                   : 0.0;
          j["window_steps"] = w.window_steps;
          return j;
        }
      return no_such("no worker " + std::to_string(a.index));
    case actor_role::shard:
      for (auto& s : v.shards)
        if (s.id == a.index) {
          auto j = shard_json(s);
          j["range"] = {s.begin, s.end};
          j["optimizer"] = v.run.optimizer;
          return j;
        }
      return no_such(
        "no shard " + std::to_string(a.index)
        + (v.shards.empty()
             ? std::string{" (the shards have not started)"}
             : " (shards: 0-" + std::to_string(v.shards.size() - 1) + ")"));
  }
  return no_such("unknown actor");
}

} // namespace troupe

#pragma GCC diagnostic pop
