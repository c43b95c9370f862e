// Where a run's data comes from: the "data" object of the run config, as
// the config reader (runtime/config) fills it in and the dataset readers
// here take it. Its own header so that the readers need not see the rest
// of the run config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// The most classes a dataset may have (labels 0..65535), and the most
/// targets a sample may have.
constexpr int max_classes = 1 << 16;

/// What a dataset's labels are, as the model's loss reads them.
enum class target_kind {
  classes,       ///< one integer class per sample (softmax cross-entropy)
  values,        ///< one or more finite floats per sample (squared error)
  probabilities, ///< one or more floats in [0, 1] per sample (binary
                 ///< cross-entropy: 0 and 1 for a sample's labels)
};

/// "class labels", "float targets" or "targets in [0, 1]", for messages.
const char* describe(target_kind k);

struct data_config {
  /// external: the user's own dataset, which troupe never reads; the
  /// feeder leases indices into its train_samples samples (an external
  /// model's step function reads them).
  enum class kind { idx, cifar10, synthetic, npy, npz, csv, click, external };
  kind format = kind::idx;
  // idx: resolved paths (relative names are joined to "dir").
  std::string train_images, train_labels, test_images, test_labels;
  // csv: the column of the labels; with float targets, one or more
  // columns (a sample's targets in this order).
  std::vector<std::string> label_columns{"label"};
  /// What the labels are: the model's loss says (read_run_config sets it).
  target_kind targets = target_kind::classes;
  // npz: the archive, and its arrays: training features and labels, test
  // features and labels.
  std::string archive;
  std::vector<std::string> arrays{"x_train", "y_train", "x_test", "y_test"};
  /// idx, npy, npz, csv: the number of classes; 0 takes the largest label of
  /// the training and test sets + 1. Labels must be below it.
  int file_classes = 0;
  /// A fraction of the training set held out as the validation set (0:
  /// none): the samples a seeded shuffle (validation_seed) puts first, the
  /// same in every process. See train_test::watched.
  double validation_split = 0;
  uint64_t validation_seed = 1;
  /// A training file that changes or goes missing during a run
  /// (errc::data_changed): false ("stop") stops the run naming it; true
  /// ("skip") leaves its samples out from then on and trains on.
  bool skip_changed_files = false;
  /// click: tab-separated click logs (runtime/data/click_data.hpp), their
  /// parts in train_files and test_files: numeric and categorical fields
  /// per line, and the ids a field's tokens are hashed into.
  int click_numeric = 0, click_categorical = 0;
  uint64_t click_vocabulary = uint64_t{1} << 24;
  /// click ("read": "stream"): the training set is read where it lies, a
  /// block of training.shuffle_block samples at a time (click_stream.hpp),
  /// and each epoch visits its parts' blocks interleaved, each part's in
  /// file order (interleaved_order). The default for gzipped logs and
  /// sets of several parts; otherwise ("memory") it is read whole.
  bool stream_train = false;
  /// idx, npz ("read": "map", the default): the folder where gzipped IDX
  /// files and deflated .npz members are inflated once, to be mapped from
  /// there (runtime/data/inflated_cache.hpp); data.cache_dir, else
  /// default_data_cache_dir(). "" ("read": "memory"): they are inflated
  /// into memory.
  std::string cache_dir;
  /// click ("follow"): the training parts are a folder that grows. New
  /// files matching follow_glob are taken as they appear, in name order,
  /// each trained once (training.order "stream", one open epoch); the
  /// run ends on a stop (shell, SIGTERM), at training.max_steps, or once
  /// no new part has come for follow_idle_stop_s (0: never).
  bool follow = false;
  std::string follow_glob;   ///< the "train" glob, resolved
  double follow_poll_s = 10; ///< how often the folder is listed
  double follow_idle_stop_s = 0;
  /// The samples a streamed set reads at once: training.shuffle_block
  /// (read_run_config copies it), so that a block read is a block of the
  /// epoch's order.
  size_t click_block = 4096;
  // cifar10: resolved batch files. npy: the feature files of each set's
  // parts (one file, a glob or a list in the config, in name order), and
  // beside them their label files; csv: the tables of each set's parts;
  // click: the logs of each set's parts.
  std::vector<std::string> train_files, test_files;
  std::vector<std::string> train_label_files, test_label_files;
  // synthetic, external
  int64_t train_samples = 1000, test_samples = 200;
  int height = 1, width = 16, channels = 1, classes = 4;
  double noise = 0.1;
  uint64_t seed = 1;
};

} // namespace troupe
