// In-memory labelled datasets and the per-epoch sample order. Samples are
// stored as floats, NHWC (one sample is height x width x channels; images
// scaled to [0, 1], other features as the file has them), labels as int32
// in [0, classes), or, for the losses that read them, float targets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/data/data_config.hpp"

namespace troupe {

/// At most 2^30 values per dataset (4 GiB as floats): far above
/// Fashion-MNIST's 47M and CIFAR-10's 154M, far below what a header may
/// claim (0xFFFFFFFF images). Every reader checks it before it allocates.
constexpr uint64_t max_dataset_values = uint64_t{1} << 30;

struct dataset {
  std::string source; ///< where it came from, for messages
  int64_t count = 0;
  int height = 0, width = 0, channels = 0;
  /// Class labels: their count. Float targets: the targets per sample,
  /// which is the width of the model's output either way.
  int classes = 0;
  std::vector<float> images;  ///< count * sample_size()
  std::vector<int32_t> labels; ///< count; empty with float targets
  /// Float targets (target_kind values and probabilities), count *
  /// classes, a sample's targets together; empty with class labels.
  std::vector<float> targets;
  /// Click logs (data.format "click"): their categorical ids, while
  /// images holds the numeric fields (1 x numeric x 1 per sample) and
  /// labels the clicks (classes 2); null for every other format.
  std::shared_ptr<const click_data> clicks;

  size_t sample_size() const {
    return static_cast<size_t>(height) * width * channels;
  }
  bool has_targets() const { return !targets.empty(); }
};

/// Reads an IDX image file (magic 0x803, unsigned bytes, N x rows x cols) and
/// its IDX label file (magic 0x801), gzipped or not, as MNIST and
/// Fashion-MNIST ship them. Errors name the file and what is wrong with it:
/// errc::file_not_found, errc::io_error, errc::bad_format (bad magic,
/// truncated data, count mismatch, label >= classes).
caf::expected<dataset> load_idx(const std::string& images_path,
                                const std::string& labels_path,
                                int classes = 10);

/// Reads NumPy .npy arrays: features of shape (N, F), (N, H, W) or
/// (N, H, W, C) as float32 or float64 (taken as they are, and required to
/// be finite) or uint8 (scaled to [0, 1], as the image readers do), and
/// labels of shape (N,) of any integer type, each in [0, max_classes).
/// (N, F) becomes samples of 1 x F x 1. `classes` is the largest label + 1.
/// With float targets (`targets` values or probabilities) the labels are
/// (N,) or (N, K) of any integer or float type, finite (and in [0, 1] for
/// probabilities), and `classes` is K.
/// Errors name the file and what is wrong: errc::file_not_found,
/// errc::io_error, errc::bad_format (magic, version, header, dtype,
/// Fortran order, shape, truncated or trailing data, counts, labels).
caf::expected<dataset> load_npy(const std::string& features_path,
                                const std::string& labels_path,
                                target_kind targets = target_kind::classes);

/// The features alone of an .npy file, as load_npy reads them (no labels,
/// classes 0): the input of a prediction.
caf::expected<dataset> load_npy_features(const std::string& path);

/// Reads two arrays of a NumPy .npz archive (np.savez or
/// np.savez_compressed), the members "<features>.npy" and "<labels>.npy",
/// as load_npy reads them. Errors name the archive (and the member): the
/// zip structure, an absent member (with the members it has), a
/// compression other than deflate, encryption, a CRC-32 mismatch, and
/// everything load_npy refuses.
caf::expected<dataset> load_npz(const std::string& path,
                                const std::string& features,
                                const std::string& labels,
                                target_kind targets = target_kind::classes);

/// Reads a CSV file with a header row: the column named `label_column`
/// holds integer labels in [0, max_classes), every other column is a
/// numeric feature taken as it is (finite). Samples are 1 x F x 1;
/// `classes` is the largest label + 1. Fields may be quoted ("a,b", ""
/// for a quote); lines end in LF or CRLF; blank lines are skipped. Errors
/// (errc::bad_format) name the file, the line and the column. An empty
/// `label_column` reads every column as a feature (no labels, classes 0).
caf::expected<dataset> load_csv(const std::string& path,
                                const std::string& label_column);
/// The same with float targets, or class labels (`targets` classes, one
/// column): the columns `label_columns` hold a sample's targets, in that
/// order, each a finite number (in [0, 1] for probabilities); `classes`
/// is their count.
caf::expected<dataset> load_csv(const std::string& path,
                                const std::vector<std::string>& label_columns,
                                target_kind targets);

/// Reads CIFAR-10 binary batch files (records of 1 label byte + 3072 pixel
/// bytes, three 32x32 planes R, G, B) and concatenates them.
caf::expected<dataset> load_cifar10(const std::vector<std::string>& paths);

/// A synthetic classification problem for tests: `classes` Gaussian blobs
/// whose centres come from `centre_seed`, samples from `sample_seed`, noise
/// standard deviation `noise`; values are clamped to [0, 1].
dataset make_synthetic(int64_t count, int height, int width, int channels,
                       int classes, double noise, uint64_t centre_seed,
                       uint64_t sample_seed);

/// The order in which epoch `epoch` visits samples 0..n-1: a Fisher-Yates
/// shuffle driven by (seed, epoch) alone, so any process computes the same
/// order, independent of the C++ library's distributions.
std::vector<uint32_t> epoch_order(size_t n, uint64_t seed, int64_t epoch);

/// Click logs as a dataset (see dataset::clicks): the numeric fields move
/// into images, the labels become 0 and 1, the ids stay in `clicks`.
dataset click_dataset(click_data logs);

/// Copies the samples named by idx[0..n) into x (n, sample_size) and their
/// labels into y (n), or their float targets into t (n, classes).
void gather_batch(const dataset& data, const uint32_t* idx, int n, float* x,
                  int32_t* y, float* t = nullptr);

} // namespace troupe

namespace troupe {

struct train_test {
  dataset train, test;
  /// Held out of the training set by data.validation_split; empty (count
  /// 0) without one.
  dataset validation;

  /// The set a run scores while it trains (progress lines, metrics,
  /// status, target_accuracy): the validation set when there is one, so
  /// that choices made while training never see the test set, which is
  /// then scored once at the end; else the test set.
  const dataset& watched() const {
    return validation.count > 0 ? validation : test;
  }
  /// "validation" or "test", as watched() chooses.
  const char* watched_name() const {
    return validation.count > 0 ? "validation" : "test";
  }
};

/// Moves round(fraction * N) samples of `train`, those a seeded shuffle
/// puts first, into the returned set (both keep the file's order).
/// errc::invalid_config when that leaves either set empty.
caf::expected<dataset> hold_out(dataset& train, double fraction,
                                uint64_t seed);

/// Loads (or, for "synthetic", makes) the training and test sets that `cfg`
/// names. Errors as load_idx / load_cifar10.
caf::expected<train_test> load_datasets(const data_config& cfg);

} // namespace troupe
