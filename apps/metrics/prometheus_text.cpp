#include "apps/metrics/prometheus_text.hpp"

#include <algorithm>

#include "runtime/base/number_text.hpp"

namespace troupe {

namespace {

std::string number(double x) {
  return number_text(x, digits::float_exact);
}

std::string number(int64_t x) {
  return std::to_string(x);
}

/// A time in seconds since the epoch: ten digits before the point, more
/// than a float's nine.
struct epoch_seconds {
  double value;
};

std::string number(epoch_seconds t) {
  return number_text(t.value, digits::decimal);
}

/// The text being written, and the labels every series of it carries:
/// the run's name and id, so that the series of two runs scraped by one
/// Prometheus stay apart.
struct page {
  std::string text;
  std::string run_labels;
};

/// One metric family: its # HELP and # TYPE lines, then samples.
class family {
public:
  family(page& out, const char* name, const char* type, const char* help)
    : out_(out), name_(name) {
    out_.text += std::string{"# HELP "} + name + " " + help + "\n# TYPE " + name
                 + " " + type + "\n";
  }

  template <class T>
  family& sample(T value, const std::string& labels = {}) {
    out_.text += name_ + "{" + out_.run_labels + (labels.empty() ? "" : ",")
                 + labels + "} " + number(value) + "\n";
    return *this;
  }

private:
  page& out_;
  std::string name_;
};

std::string label(const char* key, const std::string& value) {
  return std::string{key} + "=\"" + prometheus_label_value(value) + "\"";
}

std::string worker_labels(const worker_view& w) {
  return label("worker", std::to_string(w.id)) + "," + label("node", w.node);
}

std::string shard_labels(const shard_view& s) {
  return label("shard", std::to_string(s.id)) + "," + label("node", s.node);
}

} // namespace

std::string prometheus_label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string prometheus_text(const cluster_view& v, const process_usage& self) {
  const auto& r = v.run;
  page out;
  out.run_labels = label("run", r.name) + "," + label("run_id", r.run_id);
  family(out, "troupe_run_info", "gauge",
         "The run: its name, id, consistency mode, phase and optimizer.")
    .sample(int64_t{1}, label("mode", r.mode) + "," + label("phase", r.phase)
                          + "," + label("optimizer", r.optimizer));
  family(out, "troupe_steps_total", "counter",
         "Batches trained, all workers together (rate() is steps per "
         "second).")
    .sample(r.steps);
  family(out, "troupe_samples_total", "counter",
         "Samples trained, all workers together (rate() is samples per "
         "second).")
    .sample(r.samples);
  family(out, "troupe_planned_steps", "gauge", "The steps the run ends at.")
    .sample(r.total_steps);
  family(out, "troupe_epoch", "gauge", "Epochs trained (fractional).")
    .sample(r.epoch);
  family(out, "troupe_training_seconds_total", "counter",
         "Seconds of training, time paused from the shell left out.")
    .sample(r.seconds);
  family(out, "troupe_samples_per_second", "gauge",
         "Samples trained per second of training, averaged over the run "
         "(rate(troupe_samples_total) for a recent rate).")
    .sample(r.examples_per_sec);
  family(out, "troupe_learning_rate", "gauge",
         "The shards' learning rate now (schedule and shell included).")
    .sample(r.learning_rate);
  if (r.loss >= 0)
    family(out, "troupe_loss", "gauge", "Recent training loss.").sample(r.loss);
  if (r.test_accuracy >= 0)
    family(out, "troupe_test_accuracy", "gauge",
           "Test accuracy of the last evaluation.")
      .sample(r.test_accuracy);
  if (r.eta_seconds >= 0)
    family(out, "troupe_eta_seconds", "gauge",
           "Seconds left at the run's rate so far.")
      .sample(r.eta_seconds);
  family(out, "troupe_paused", "gauge", "1 while paused from the shell.")
    .sample(int64_t{r.paused ? 1 : 0});
  family(out, "troupe_restarts_total", "counter",
         "Worker restarts after failures.")
    .sample(int64_t{r.restarts});
  family(out, "troupe_shard_recoveries_total", "counter",
         "Shard losses recovered from a checkpoint or the live shards.")
    .sample(int64_t{r.shard_recoveries});
  family(out, "troupe_lost_steps_total", "counter",
         "Steps lost to shard recoveries and trained again.")
    .sample(r.lost_steps);
  if (r.stream_parts >= 0) { // data.follow
    family(out, "troupe_stream_parts", "gauge",
           "Parts of the followed folder taken into training.")
      .sample(r.stream_parts);
    family(out, "troupe_stream_parts_waiting", "gauge",
           "Parts of the followed folder known and not taken yet.")
      .sample(r.stream_waiting);
    family(out, "troupe_progressive_samples", "gauge",
           "Samples trained, each scored before its step.")
      .sample(r.progressive_samples);
    if (r.progressive_loss >= 0)
      family(out, "troupe_progressive_log_loss", "gauge",
             "Mean log-loss of the samples trained, each before its step.")
        .sample(r.progressive_loss);
    if (r.parts_loss >= 0)
      family(out, "troupe_parts_log_loss", "gauge",
             "Mean log-loss of the parts, each scored whole before its "
             "first step.")
        .sample(r.parts_loss);
    if (r.last_part_loss >= 0) {
      family(out, "troupe_last_part_log_loss", "gauge",
             "The last part's log-loss before it was trained on.")
        .sample(r.last_part_loss, label("part", r.last_part));
      family(out, "troupe_last_part_auc", "gauge",
             "The last part's AUC before it was trained on.")
        .sample(r.last_part_auc, label("part", r.last_part));
    }
  }
  if (r.export_sequence >= 0) { // training.export
    family(out, "troupe_export_sequence", "gauge",
           "The last export's number in its folder.")
      .sample(r.export_sequence, label("kind", r.export_kind));
    family(out, "troupe_export_step", "gauge", "The step of the last export.")
      .sample(r.export_step);
    family(out, "troupe_export_age_seconds", "gauge",
           "Seconds since the last export was written: how far behind "
           "training a server that applies each export is.")
      .sample(r.export_age);
    family(out, "troupe_export_rows", "gauge",
           "Rows in the last export (a delta's: the rows changed).")
      .sample(r.export_rows);
    family(out, "troupe_export_evicted_keys", "gauge",
           "Keys evicted that the last export removes (a delta's "
           "tombstones).")
      .sample(r.export_evicted);
    family(out, "troupe_export_bytes", "gauge",
           "Bytes of the last export's table files.")
      .sample(r.export_bytes);
  }
  if (v.feeder.answered)
    family(out, "troupe_feeder_batches_done_total", "counter",
           "Batches the feeder counts done.")
      .sample(v.feeder.acked);
  {
    family f(out, "troupe_node_up", "gauge", "1 while a node is up.");
    for (auto& n : v.nodes)
      f.sample(int64_t{n.up ? 1 : 0},
               label("node", n.name) + "," + label("address", n.address));
  }
  // One sample per worker: its `value` (only of workers that trained a
  // step, with `trained_only`).
  auto per_worker = [&](const char* name, const char* type, const char* help,
                        auto value, bool trained_only = false) {
    family f(out, name, type, help);
    for (auto& w : v.workers)
      if (!trained_only || w.step > 0)
        f.sample(value(w), worker_labels(w));
  };
  per_worker("troupe_worker_steps_total", "counter",
             "Steps a worker trained, all its incarnations.",
             [](const worker_view& w) { return w.step; });
  per_worker("troupe_worker_samples_total", "counter",
             "Samples a worker trained.",
             [](const worker_view& w) { return w.samples; });
  per_worker("troupe_worker_samples_per_second", "gauge",
             "A worker's samples per second of its compute time.",
             [](const worker_view& w) { return w.examples_per_sec; });
  per_worker("troupe_worker_staleness", "gauge",
             "The most updates a shard applied between a pull of the "
             "worker and its push, over its last report.",
             [](const worker_view& w) { return w.staleness; });
  per_worker("troupe_worker_staleness_mean", "gauge",
             "The mean staleness of a worker's steps (the most updates a "
             "shard applied between the step's pull and its push), all its "
             "incarnations.",
             [](const worker_view& w) { return w.mean_staleness; });
  per_worker(
    "troupe_worker_loss", "gauge",
    "The training loss of a worker's last report.",
    [](const worker_view& w) { return w.loss; }, true);
  per_worker("troupe_worker_read_seconds_total", "counter",
             "Seconds a worker's steps waited on reading their samples.",
             [](const worker_view& w) { return w.read_seconds; });
  per_worker("troupe_worker_read_bytes_total", "counter",
             "Bytes a worker read from the dataset's files for its steps "
             "(compressed ones for gzip).",
             [](const worker_view& w) { return w.read_bytes; });
  per_worker("troupe_worker_restarts_total", "counter", "Restarts of a worker.",
             [](const worker_view& w) { return int64_t{w.restarts}; });
  // One sample per shard that answered: its `value` (-1: none to give).
  auto per_shard = [&](const char* name, const char* type, const char* help,
                       auto value) {
    family f(out, name, type, help);
    for (auto& s : v.shards)
      if (s.answered && value(s) >= 0)
        f.sample(value(s), shard_labels(s));
  };
  per_shard("troupe_shard_updates_total", "counter",
            "A shard's version: updates applied (rate() is its update rate).",
            [](const shard_view& s) { return s.version; });
  {
    family f(out, "troupe_shard_pushes_total", "counter",
             "Gradient pushes a shard took, by outcome.");
    for (auto& s : v.shards)
      if (s.answered) {
        f.sample(s.accepted, shard_labels(s) + ",outcome=\"accepted\"");
        f.sample(s.stale, shard_labels(s) + ",outcome=\"stale\"");
        f.sample(s.refused, shard_labels(s) + ",outcome=\"refused\"");
      }
  }
  per_shard("troupe_shard_pulled_bytes_total", "counter",
            "Parameter bytes a shard sent to pulls (workers' and the chief's).",
            [](const shard_view& s) { return s.pulled_bytes; });
  per_shard("troupe_shard_pushed_bytes_total", "counter",
            "Gradient bytes pushed to a shard.",
            [](const shard_view& s) { return s.pushed_bytes; });
  // Embedding tables: only when the model has them (rows -1 otherwise).
  if (std::any_of(v.shards.begin(), v.shards.end(),
                  [](const shard_view& s) { return s.rows >= 0; })) {
    // One series per shard and table: a model's tables differ in size
    // and traffic by orders of magnitude, and a sum would hide which one
    // fills a shard.
    auto per_table = [&](const char* name, const char* type, const char* help,
                         auto value) {
      family f(out, name, type, help);
      for (auto& s : v.shards)
        if (s.answered && s.rows >= 0)
          for (auto& t : s.tables)
            f.sample(value(t), shard_labels(s) + "," + label("table", t.name));
    };
    per_table("troupe_shard_rows", "gauge",
              "Embedding-table rows a shard holds, by table.",
              [](const table_view& t) { return t.rows; });
    per_table("troupe_shard_row_memory_bytes", "gauge",
              "Bytes of a shard's rows of a table: values, optimizer state, "
              "index.",
              [](const table_view& t) { return t.row_bytes; });
    per_table("troupe_shard_rows_pulled_total", "counter",
              "Table rows a shard sent to pulls, by table.",
              [](const table_view& t) { return t.rows_pulled; });
    per_table("troupe_shard_rows_pushed_total", "counter",
              "Table row gradients pushed to a shard, by table.",
              [](const table_view& t) { return t.rows_pushed; });
    per_table("troupe_shard_rows_made_total", "counter",
              "Table rows a shard made (a key admitted), by table.",
              [](const table_view& t) { return t.rows_made; });
    per_table("troupe_shard_rows_rejected_total", "counter",
              "Row gradients a shard dropped for keys its table has not "
              "admitted, by table.",
              [](const table_view& t) { return t.rows_rejected; });
    per_table("troupe_shard_rows_evicted_total", "counter",
              "Table rows a shard evicted (time to live, capacity), by "
              "table.",
              [](const table_view& t) { return t.rows_evicted; });
    if (std::any_of(v.shards.begin(), v.shards.end(), [](const shard_view& s) {
          return std::any_of(s.tables.begin(), s.tables.end(),
                             [](const table_view& t) {
                               return t.filter_counters > 0;
                             });
        })) {
      per_table("troupe_shard_admission_counters_used", "gauge",
                "Counters above zero in a table's admission filter on a "
                "shard (min_count): past half of them, it admits keys "
                "early.",
                [](const table_view& t) { return t.filter_used; });
      per_table("troupe_shard_admission_counters", "gauge",
                "Counters of a table's admission filter on a shard.",
                [](const table_view& t) { return t.filter_counters; });
    }
  }
  // Replicas: only in a run that keeps them (cluster.shard_replicas).
  if (std::any_of(v.shards.begin(), v.shards.end(),
                  [](const shard_view& s) { return !s.replica.empty(); })) {
    per_shard("troupe_shard_replica_lag_updates", "gauge",
              "Updates a shard sent its replica that the replica has not "
              "applied yet (replication lag).",
              [](const shard_view& s) { return s.replica_lag; });
    per_shard("troupe_shard_replica_in_step", "gauge",
              "1 when a shard's replica holds every push the shard "
              "acknowledged, else 0.",
              [](const shard_view& s) {
                return int64_t{s.replica == "in step" ? 1 : 0};
              });
    per_shard("troupe_shard_replica_rows_copied", "gauge",
              "Table rows copied to a shard's newest replica.",
              [](const shard_view& s) { return s.replica_rows; });
  }
  // One sample per node whose process answered (-1: it did not).
  auto per_node = [&](const char* name, const char* type, const char* help,
                      auto value) {
    family f(out, name, type, help);
    for (auto& n : v.nodes)
      if (value(n) >= 0)
        f.sample(value(n), label("node", n.name));
  };
  per_node("troupe_node_resident_memory_bytes", "gauge",
           "Resident memory of a node's process.",
           [](const node_view& n) { return n.resident_bytes; });
  per_node("troupe_node_heap_bytes", "gauge",
           "Heap in use in a node's process: what malloc handed out and did "
           "not have back.",
           [](const node_view& n) { return n.heap_bytes; });
  per_node("troupe_node_cpu_seconds_total", "counter",
           "User and system CPU time of a node's process.",
           [](const node_view& n) { return n.cpu_seconds; });
  {
    family f(out, "troupe_node_start_time_seconds", "gauge",
             "Start of a node's process, in seconds since the epoch.");
    for (auto& n : v.nodes)
      if (n.started_unix >= 0)
        f.sample(epoch_seconds{n.started_unix}, label("node", n.name));
  }
  per_node("troupe_node_heard_age_seconds", "gauge",
           "Seconds since the chief last heard from a node (its agent's "
           "answer, a report of one of its workers).",
           [](const node_view& n) { return n.heard_age; });
  family(out, "process_resident_memory_bytes", "gauge",
         "Resident memory of the serving process (the chief's).")
    .sample(self.resident_bytes);
  family(out, "process_heap_bytes", "gauge",
         "Heap in use in the serving process (the chief's).")
    .sample(self.heap_bytes);
  family(out, "process_cpu_seconds_total", "counter",
         "User and system CPU time of the serving process.")
    .sample(self.cpu_seconds);
  family(out, "process_start_time_seconds", "gauge",
         "Start of the serving process, in seconds since the epoch.")
    .sample(epoch_seconds{self.started_unix});
  return out.text;
}

} // namespace troupe
