// What the sections of a run config require of each other, checked once
// every section is read: a click model and click logs, an external model
// and the user's own data, float targets and the losses that read them.
#include <string>

#include "runtime/base/errc.hpp"
#include "runtime/config/config_reader.hpp"

namespace troupe::config_detail {

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

/// cluster.prefetch and cluster.stale_lookahead "auto" (their default).
/// Async workers of a model troupe computes with Adam prefetch where the
/// cluster runs as processes: there a step's exchange (a pull and a push
/// through another process, about 1 ms on 2 cores) costs nearly as much as
/// its compute, where one process hands a pointer (0.25 ms), and hiding it
/// behind the compute takes the processes from 0.56 to 0.99 of one process
/// at one worker (docs/benchmarks.md, "Processes against one process").
/// Workers that prefetch pull the values looked ahead by the pushes'
/// staleness (stale_lookahead 1), which wins back the accuracy the extra
/// step of staleness costs: Adam's steps keep their direction from one
/// update to the next (0.8398 without, 0.8607 with, against 0.8594 without
/// prefetch; 1 worker, 2 epochs). SGD's and momentum's do less: with 2
/// workers both lost 0.9-2 points, so they keep the exact order, as do
/// embedded runs, a Python step (model "external": its own thread) and a
/// model with embedding tables (its rows' order), unless the file asks.
void resolve_overlap(run_config& cfg) {
  auto& c = cfg.cluster;
  bool async = c.consistency == cluster_config::mode::async;
  if (c.prefetch_auto) {
    c.prefetch = async && c.distributed()
                 && cfg.training.optimizer.type == optimizer_config::kind::adam
                 && cfg.model.type != model_config::kind::external
                 && embedding_tables(cfg).empty();
    c.prefetch_auto = false;
  }
  if (c.stale_lookahead_auto) {
    c.stale_lookahead = async && c.prefetch ? 1 : 0;
    c.stale_lookahead_auto = false;
  }
}

} // namespace troupe::config_detail
