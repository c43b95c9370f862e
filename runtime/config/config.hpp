// The run configuration: JSON -> plain structs, validated in one place.
// Every error is one line that names the file, the JSON pointer of the bad
// value, what was expected and what was found; unknown keys are errors.
//
// Shape of a file (see config/ for complete examples):
//   { "name": "...",
//     "model":    { "type": "mlp", "hidden": [256, 128], ... },
//     "data":     { "format": "idx", "dir": "/usr/share/datasets/fashion-mnist"
//     }, "training": { "batch_size": 128, "epochs": 10,
//                   "optimizer": { "type": "adam", "learning_rate": 0.001 },
//                   "checkpoint": { "dir": "ckpt", "every_steps": 1000 } } }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/data/data_config.hpp"
#include "runtime/data/data_partition.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/config/layer_spec.hpp"
#include "runtime/params/consistency.hpp"
#include "runtime/params/optimizer.hpp"
#include "runtime/sparse/sparse_config.hpp"

namespace troupe {

struct model_config {
  /// click: a click-through model (models/click_step.hpp): the categorical
  /// fields of click logs looked up in one embedding table held by the
  /// shards, mean-pooled per field, concatenated with the numeric fields
  /// and fed to an MLP (`hidden`) with a two-way softmax.
  /// external: the user's own model, computed outside troupe (the Python
  /// module's step function); the shards hold the tensors `parameters`
  /// names, with its values to start from.
  /// layers: the list in `layers`, Keras-Sequential style. softmax, mlp,
  /// cnn and click are shorthands for such lists (models/layer_list.hpp).
  enum class kind { softmax, mlp, cnn, click, external, layers };
  enum class init_kind { normal, xavier, he };
  kind type = kind::mlp;
  /// Hidden dense layer sizes (mlp; for cnn the dense layers after the
  /// convolutions). Input and output sizes come from the dataset.
  std::vector<int> hidden;
  activation act = activation::relu;
  /// Weight initialisation: normal(0, init_stddev) as the classic TF
  /// tutorials did, Xavier/Glorot uniform, or He normal. Biases start at 0.
  init_kind init = init_kind::he;
  double init_stddev = 1.0;
  std::vector<int> conv_channels{32, 64}; ///< cnn: output channels per block
  int kernel_size = 5;                    ///< cnn: odd, "same" padding
  uint64_t seed = 1;                      ///< initialisation seed
  /// click: the embedding table ("embedding"; its vocabulary and seed come
  /// from data.vocabulary and the model's seed) and the fields it pools
  /// per sample (data.categorical), both set when the config is read.
  embedding_table_config table;
  int table_fields = 0;
  /// external: a safetensors file of F32 tensors (e.g. a PyTorch
  /// model's state_dict), their names, shapes and initial values.
  std::string parameters;
  /// external: the embedding tables whose rows its step pulls by key
  /// ("tables"), each with its own row optimizer (by default
  /// training.sparse_optimizer); table i is row requests' table i.
  std::vector<table_setup> tables;
  /// layers: the model, first layer first; the last one's output is what
  /// `loss` scores.
  std::vector<layer_spec> layers;
  loss_kind loss = loss_kind::softmax_cross_entropy;
};

struct checkpoint_config {
  std::string dir;         ///< empty: no checkpoints
  int64_t every_steps = 0; ///< 0: only at the end of the run
  /// Continue from the newest checkpoint in dir of the same config (and
  /// refuse a folder holding only other configs' checkpoints), or start
  /// from step 0 when it holds none, as TensorFlow's MonitoredTrainingSession
  /// does. false: start over, setting the folder's checkpoints of other
  /// runs aside (runtime/checkpoint/checkpoint_dir.hpp).
  bool resume = true;
  /// The newest checkpoints of a run kept in dir (as TensorFlow's Saver's
  /// max_to_keep); 0 keeps every one.
  int keep = 5;
};

/// Exports of the embedding tables for serving (runtime/sparse/
/// table_export.hpp): a full export, then deltas of the rows changed and
/// the keys evicted since the one before, every_steps steps or
/// every_seconds seconds apart, and one at the end of the run.
struct export_config {
  std::string dir;          ///< empty: no exports
  int64_t every_steps = 0;  ///< 0: not by steps
  double every_seconds = 0; ///< 0: not by time
  /// The newest chains (a full export and its deltas) kept in dir; older
  /// ones are removed once a newer full export is written.
  int keep = 2;
};

/// Where a worker runs its forward and backward passes: the CPU backend
/// (OpenBLAS) or CUDA device `index` (gpu/). Written "cpu", "gpu" (the
/// first device) or "gpu:N".
struct device_spec {
  enum class kind { cpu, gpu };
  kind type = kind::cpu;
  int index = 0;

  bool is_gpu() const { return type == kind::gpu; }
  /// "cpu" or "gpu:N".
  std::string to_string() const {
    return is_gpu() ? "gpu:" + std::to_string(index) : "cpu";
  }
};

/// "cpu", "gpu" or "gpu:N" (N a decimal device index); nullopt otherwise.
std::optional<device_spec> parse_device(const std::string& text);
/// What parse_device refused, for an error message: "expected \"cpu\",
/// \"gpu\" or \"gpu:N\", found \"<text>\"".
std::string bad_device_message(const std::string& text);

/// training.shuffle_block's default for a streamed set: a few batches of
/// reading per block, and a few MB parsed.
constexpr int64_t streamed_block = 4096;

struct training_config {
  int batch_size = 128;
  int epochs = 10;       ///< stop after this many epochs
  int64_t max_steps = 0; ///< 0: no step limit
  uint64_t seed = 1;     ///< epoch shuffling seed
  /// How workers divide the training set (runtime/data/data_partition.hpp).
  data_partition partition = data_partition::shared;
  /// Epochs shuffle blocks of this many consecutive samples, and the
  /// samples inside each block (epoch_order); 1 shuffles every sample.
  /// A streamed set (data_config::stream_train) reads a block at a time,
  /// and its default is streamed_block.
  int64_t shuffle_block = 1;
  /// stream: each epoch takes the samples in the set's own order (its
  /// parts in name order, each part's lines in order), as a stream of
  /// logs that drifts over time must be trained; shuffled: epoch_order.
  bool stream_order = false;
  /// Compute threads per worker (the CPU backend's pool); 0 is "auto",
  /// the config's default: compute_threads() splits the node's cores.
  int threads = 0;
  device_spec device; ///< the workers' backend ("device"); cpu
  int64_t log_every_steps = 100;
  int64_t eval_every_steps = 0; ///< 0: evaluate at the end of each epoch
  optimizer_config optimizer;
  /// The row-wise optimizer of embedding tables (model "click", and an
  /// external model's tables that name none), which the shards apply to
  /// each pushed row; `optimizer` trains the dense part.
  sparse_optimizer_config sparse_optimizer;
  checkpoint_config checkpoint;
  export_config exports; ///< "export"
};

/// One OS process of a multi-process cluster: where it listens and which
/// roles the cluster file places on it.
struct node_config {
  std::string name;
  std::string host;  ///< where the other nodes reach it
  uint16_t port = 0; ///< its control port (CAF's middleman)
  /// Its data plane's port; 0: one the kernel chooses.
  uint16_t data_port = 0;
  /// The address its listeners bind; empty: `host`. Membership from the
  /// environment binds every interface ("0.0.0.0"), as a pod or a Slurm
  /// node may not resolve its own name to the address its peers use.
  std::string bind;

  /// The address its listeners bind.
  const std::string& listen_host() const { return bind.empty() ? host : bind; }
  int shards = 0;  ///< parameter shards it holds, numbered in file order
  int workers = 0; ///< workers it starts with, numbered in file order
  /// The backend of the workers this node runs (its own and any moved or
  /// added to it); unset: training.device.
  std::optional<device_spec> device;
  /// This node's TLS certificate and key; empty: /cluster/tls's.
  std::string certificate, key;
};

/// Mutual TLS for every link of a cluster (/cluster/tls): PEM files, read
/// from the working directory like every path of a config. Each node
/// presents a certificate signed by the CA and admits only peers that do.
struct cluster_tls {
  std::string ca;
  std::string certificate; ///< for nodes without their own
  std::string key;
  /// A peer that has not finished its TLS handshake by then is closed.
  int64_t handshake_timeout_ms = 5000;

  bool enabled() const { return !ca.empty(); }
};

/// How the actor cluster runs: roles, consistency mode, supervision.
/// Without "nodes" everything lives in one process (the embedded mode);
/// with them, "shards" and "workers" are the sums over the nodes, and the
/// chief and the feeder live on the node named by "chief".
struct cluster_config {
  /// What the chief does with the workers of a node that went down:
  /// start them on the surviving nodes, or wait for the node to rejoin.
  enum class node_loss { move, wait };
  /// The consistency modes and the staleness rules: runtime/params/
  /// consistency.hpp, beside the shard's rules that keep them.
  using mode = consistency_mode;
  using stale_rate = troupe::stale_rate;
  using stale_momentum_rule = troupe::stale_momentum_rule;
  using sync_rate = troupe::sync_rate;
  int shards = 2;
  int workers = 2;
  /// Replicas per shard, each on another node than its primary and kept
  /// in step with it (actors/shard.hpp): 0 or 1. Needs nodes, two of
  /// which hold shards.
  int shard_replicas = 0;
  mode consistency = mode::async;
  /// sync: pushes averaged per update; 0 = all workers (no backups).
  int replicas_to_aggregate = 0;
  /// ssp: how many clocks a worker may run ahead of the slowest.
  int staleness = 3;
  stale_rate stale_lr = stale_rate::divide;
  stale_momentum_rule stale_momentum = stale_momentum_rule::none;
  sync_rate sync_lr = sync_rate::sqrt;
  /// sync: updates over which sync_lr's scaled rate is reached.
  int64_t sync_warmup = 0;
  /// async, ssp: DC-ASGD's lambda (runtime/params/stale_compensation.hpp);
  /// 0: off.
  double delay_compensation = 0;
  /// async, ssp: workers pull the values extrapolated along the last
  /// update by this many times the pushes' mean staleness
  /// (param_block::values_for_workers); 0: off. A file's "auto" (its
  /// default) is 1 where async workers prefetch, else 0 (resolve_overlap).
  double stale_lookahead = 0;
  /// async: start a step's pull and lease as the step before starts
  /// computing, so the shards' update overlaps the next compute; the
  /// values then lack the worker's own last update (one step more stale),
  /// which stale_lookahead makes up for. Off: the pull goes out right
  /// after the push and sees it. A file's "auto" (its default) turns it
  /// on where the exchange crosses processes (resolve_overlap).
  bool prefetch = false;
  /// async: a worker leases as many batches at once as it trains in this
  /// many milliseconds (from its last steps' pace), at most
  /// max_leases_ahead; 0 (the default): one at a time. Each lease is a
  /// request to the feeder, which serves every worker from one actor in
  /// the chief's process, so this divides what a step costs the chief by
  /// up to max_leases_ahead. The batches leased ahead hold a checkpoint's
  /// pause or a stop back by at most this long. Not on by default: with 2
  /// async workers it widens the spread of test accuracy downwards
  /// (docs/benchmarks.md, "Processes against one process").
  int64_t lease_ahead_ms = 0;
  /// Read from a file: "prefetch" or "stale_lookahead" was "auto" (or
  /// absent); resolve_overlap settles both once the model is read.
  bool prefetch_auto = false;
  bool stale_lookahead_auto = false;
  /// easgd: communication period (local steps between exchanges).
  int tau = 4;
  /// easgd: beta of TF's ElasticAverageOptimizer.
  double beta = 0.9;
  /// easgd: elastic moving rate; 0 = beta / tau / workers (TF's default).
  double moving_rate = 0;
  /// Supervision, as Erlang/OTP's intensity: past max_restarts restarts
  /// within restart_window_s seconds the run stops with an error.
  int max_restarts = 3;
  double restart_window_s = 60;
  /// Stop once test accuracy reaches this; 0 = no target.
  double target_accuracy = 0;
  /// Every request between actors times out after this (milliseconds).
  int64_t request_timeout_ms = 30000;
  /// Metrics as JSON lines and CSV under this folder; empty = none.
  std::string metrics_dir;
  std::vector<node_config> nodes; ///< empty: embedded
  std::string chief_node;         ///< the node running chief and feeder
  /// Each node's data plane at its control port plus this, unless the
  /// node gives "data_port"; 0: ports the kernel chooses.
  int data_port_offset = 0;
  /// Membership from Slurm (runtime/config/membership.hpp): task i's
  /// control port is base_port + 2i, its data plane's base_port + 2i + 1.
  int base_port = 7400;
  /// How long the chief waits for every node to register.
  double node_timeout_s = 30;
  /// Middleman heartbeats; a link silent for connection_timeout_ms is
  /// closed and its actors are reported down.
  int64_t heartbeat_interval_ms = 500;
  int64_t connection_timeout_ms = 3000;
  /// A worker and a shard on one host exchange values and gradients
  /// through shared memory, not TCP (actors/data_plane/shared_link.hpp).
  bool shared_memory = true;
  node_loss on_node_loss = node_loss::move;
  cluster_tls tls;

  bool distributed() const { return !nodes.empty(); }
  /// The nodes' names in file order, comma separated (for messages).
  std::string node_names() const {
    std::string names;
    for (auto& n : nodes)
      names += (names.empty() ? "" : ", ") + n.name;
    return names;
  }
  /// The node called `name`, or null.
  const node_config* node(const std::string& name) const {
    for (auto& n : nodes)
      if (n.name == name)
        return &n;
    return nullptr;
  }

  /// The moving rate in effect.
  double elastic_rate() const {
    return moving_rate > 0 ? moving_rate : beta / tau / workers;
  }
  /// Pushes averaged per sync update.
  int aggregate() const {
    return replicas_to_aggregate > 0 ? replicas_to_aggregate : workers;
  }
};

struct run_config {
  std::string origin; ///< the file it came from
  /// The folder its relative paths were read from (absolute; the file's
  /// folder unless "base_dir" names another); empty: the working
  /// directory, for a text that came from no file.
  std::string base_dir;
  std::string name;
  model_config model;
  data_config data;
  training_config training;
  cluster_config cluster;
};

/// Empty when no two ports of `nodes` (control and data plane) on one
/// host are the same; else which two clash.
std::string port_clash(const std::vector<node_config>& nodes);

/// Reads and validates the run configuration in `path`. Errors:
/// errc::file_not_found / errc::io_error for the file itself,
/// errc::invalid_config for anything wrong inside it (one line naming the
/// JSON pointer), errc::file_not_found for a dataset file that is missing
/// (also naming the JSON pointer).
caf::expected<run_config> load_run_config(const std::string& path);

/// The text of a config file, with load_run_config's errors for the file.
caf::expected<std::string> read_config_text(const std::string& path);

/// The same for JSON text; `origin` names it in messages. Relative paths
/// in it are read from the working directory, or from its "base_dir".
caf::expected<run_config> parse_run_config(const std::string& text,
                                           const std::string& origin);

/// The same with relative paths read from `base_dir` (a config file's
/// folder, config_folder()), or from "base_dir" in the text joined to it.
caf::expected<run_config> parse_run_config(const std::string& text,
                                           const std::string& origin,
                                           const std::string& base_dir);

/// The absolute folder of a config file: where its relative paths start.
std::string config_folder(const std::string& path);

/// One value a command-line flag sets in a config's JSON before it is
/// read, so that the reader checks it as it checks the file.
struct config_setting {
  std::string pointer; ///< "/training/optimizer/learning_rate"
  std::string value;   ///< JSON text: "0.01", "\"name\""
};

/// `text` with each setting made, objects on the way created; `text`
/// unchanged when it is not JSON (the reader then says why).
/// errc::invalid_config names a pointer that crosses a value that is not
/// an object.
caf::expected<std::string>
apply_settings(const std::string& text, const std::string& origin,
               const std::vector<config_setting>& settings);

/// `text` (read as `cfg`) with "base_dir" set to cfg.base_dir: the text a
/// chief hands to nodes that join, whose relative paths then start where
/// the chief's did.
caf::expected<std::string> with_base_dir(const std::string& text,
                                         const run_config& cfg);

/// "async", "sync", "ssp", "easgd".
const char* to_string(cluster_config::mode m);

/// "softmax", "mlp", "cnn".
/// The embedding tables of a run with their row optimizers, numbered as
/// row requests name them: the table of a click model (updated by
/// training.sparse_optimizer), an external model's "tables"; none for the
/// others.
std::vector<table_setup> embedding_tables(const run_config& cfg);

/// Their row widths, in the same order.
std::vector<int> embedding_dims(const model_config& m);

const char* to_string(model_config::kind k);
const char* to_string(data_config::kind k);

/// Compute threads for each of `workers_here` workers in this process:
/// `configured` when it is a count, and for "auto" (0) this machine's
/// hardware threads divided among the workers (at least 1), so the
/// workers' pools together fill the cores without oversubscribing them.
/// troupe-train is one worker.
int compute_threads(int configured, int workers_here);

} // namespace troupe
