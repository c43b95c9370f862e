// Labelled datasets and the per-epoch sample order. A sample's features
// stay as the file stores them (feature_store: mapped or read, bytes or
// floats) and become floats, NHWC (height x width x channels; images
// scaled to [0, 1], other features as the file has them), when a batch
// reads them; labels are int32 in [0, classes), or, for the losses that
// read them, float targets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/data/click_stream.hpp"
#include "runtime/data/data_config.hpp"
#include "runtime/data/feature_store.hpp"
#include "runtime/data/mapped_file.hpp"

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
  /// count samples of sample_size() values; empty where this process
  /// does not read the set's features (data_needs).
  feature_store features;
  std::vector<int32_t> labels; ///< count; empty with float targets
  /// Float targets (target_kind values and probabilities), count *
  /// classes, a sample's targets together; empty with class labels.
  std::vector<float> targets;
  /// Click logs (data.format "click"): their categorical ids, while
  /// features holds the numeric fields (1 x numeric x 1 per sample) and
  /// labels the clicks (classes 2); null for every other format.
  std::shared_ptr<const click_data> clicks;
  /// Click logs read where they lie (data.read "stream"): the training
  /// set's parts, read a block at a time; clicks, features and labels are
  /// then empty, and a batch reads its samples from here.
  std::shared_ptr<const click_stream> click_parts;
  /// The mapped files the features lie in (.npy files and parts), each
  /// with its samples [first, first + count): check_files looks at those
  /// a batch reads before it reads them. Empty for features in memory,
  /// and for a validation split and what it leaves (rows of the file).
  struct mapped_part {
    int64_t first = 0, count = 0;
    std::shared_ptr<const mapped_file> file;
  };
  std::vector<mapped_part> mapped;
  /// The files a set of many parts (.npy, streamed click logs) holds its
  /// samples in, each with its samples [first, first + count), whether
  /// this process read their features or not: which samples a file that
  /// changed during the run held.
  struct file_part {
    std::string path;
    int64_t first = 0, count = 0;
  };
  std::vector<file_part> files;

  size_t sample_size() const {
    return static_cast<size_t>(height) * width * channels;
  }
  bool has_targets() const { return !targets.empty(); }
};

/// Reads an IDX image file (magic 0x803, unsigned bytes, N x rows x cols) and
/// its IDX label file (magic 0x801), gzipped or not, as MNIST and
/// Fashion-MNIST ship them: an uncompressed one is mapped; a gzipped one is
/// inflated once into `cache_dir` and mapped from there
/// (runtime/data/inflated_cache.hpp), or, with no `cache_dir`, inflated
/// into memory as bytes; without read_features, only its header is read
/// (the labels always are). Errors name the file and what is wrong with
/// it: errc::file_not_found, errc::io_error, errc::bad_format (bad magic,
/// truncated data, count mismatch, label >= classes).
caf::expected<dataset> load_idx(const std::string& images_path,
                                const std::string& labels_path,
                                int classes = 10, bool read_features = true,
                                const std::string& cache_dir = "");

/// Reads NumPy .npy arrays, mapped (the features stay in the file, read
/// where a batch needs them; without read_features only their header is
/// read): features of shape (N, F), (N, H, W) or
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
                                target_kind targets = target_kind::classes,
                                bool read_features = true);

/// The features alone of an .npy file, as load_npy reads them (no labels,
/// classes 0): the input of a prediction.
caf::expected<dataset> load_npy_features(const std::string& path);

/// Reads two arrays of a NumPy .npz archive (np.savez or
/// np.savez_compressed), the members "<features>.npy" and "<labels>.npy",
/// as load_npy reads them: a stored member where it lies in the mapped
/// archive, a deflated one inflated once into `cache_dir` and mapped from
/// there, or into memory with no `cache_dir`. Errors name the archive (and the
/// member): the zip structure, an absent member (with the members it has), a
/// compression other than deflate, encryption, a CRC-32 mismatch, and
/// everything load_npy refuses.
caf::expected<dataset>
load_npz(const std::string& path, const std::string& features,
         const std::string& labels, target_kind targets = target_kind::classes,
         bool read_features = true, const std::string& cache_dir = "");

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
/// order, independent of the C++ library's distributions. With `block` >
/// 1, a shuffle of blocks of `block` consecutive samples (the last may be
/// shorter), each block's samples shuffled among themselves: a batch then
/// reads from one stretch of a file, as a set larger than memory needs.
std::vector<uint32_t> epoch_order(size_t n, uint64_t seed, int64_t epoch,
                                  size_t block = 1);

/// Parts a streamed set reads from at once (interleaved_order).
constexpr size_t interleaved_parts = 8;

/// The order of epoch `epoch` of a set read part by part, each part from
/// its start to its end (streamed click logs: click_stream.hpp), as
/// tf.data's interleave of shuffled files reads them: every part, of
/// parts[p] samples, is cut into blocks of `block` consecutive samples;
/// the parts are taken in a shuffled order, `open_parts` at a time, and
/// each next block comes from one of the open parts at random, each
/// part's blocks in file order; a part whose blocks are all taken makes
/// room for the next. Each block's samples are shuffled among themselves.
/// Samples are numbered part after part.
std::vector<uint32_t> interleaved_order(const std::vector<size_t>& parts,
                                        uint64_t seed, int64_t epoch,
                                        size_t block,
                                        size_t open_parts = interleaved_parts);

/// The sets read from each part of a set of many files, as one: their
/// samples one part after another. errc::bad_format, naming the part,
/// where a part's samples are shaped otherwise, hold another number of
/// targets, or store another type than the first part's.
caf::expected<dataset> join_parts(std::vector<dataset> parts);

/// How messages name a set of `parts` files whose first is `first`: its
/// name alone, or "<first> and N more part(s)".
std::string parts_name(const std::string& first, size_t parts);

/// Click logs as a dataset (see dataset::clicks): the numeric fields move
/// into images, the labels become 0 and 1, the ids stay in `clicks`.
dataset click_dataset(click_data logs);
/// Streamed click logs as a dataset (see dataset::click_parts).
dataset streamed_click_dataset(std::shared_ptr<const click_stream> parts);

/// errc::data_changed, naming the file, when a mapped file that samples
/// idx[0..n) lie in changed or went missing since it was opened (a file
/// cut short would end the process with SIGBUS when read); none else. A
/// stat of each such file, once per call.
caf::error check_files(const dataset& data, const uint32_t* idx, int n);

/// Copies the samples named by idx[0..n) into x (n, sample_size), as
/// floats, and their labels into y (n), or their float targets into t
/// (n, classes). The set's features must have been read.
void gather_batch(const dataset& data, const uint32_t* idx, int n, float* x,
                  int32_t* y, float* t = nullptr);

} // namespace troupe

namespace troupe {

/// Which sets' features a process reads. Every process reads the labels
/// and the shapes (the model's size and the feeder's plan come from
/// them); a worker's node needs the training samples, the chief the
/// samples it scores (the test set, and the validation split, which is
/// part of the training set's file).
struct data_needs {
  bool train = true;
  bool test = true;
  /// A node that trains, and scores nothing.
  static data_needs training() { return {true, false}; }
  /// The chief without workers of its own: what it evaluates on.
  static data_needs scoring(const data_config& cfg) {
    return {cfg.validation_split > 0, true};
  }
};

struct train_test {
  dataset train, test;
  /// Whose features were read (the others hold shapes and labels only).
  data_needs read;
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
/// puts first, into the returned set (both keep the file's order; their
/// features stay where they are, each set naming its rows).
/// errc::invalid_config when that leaves either set empty.
caf::expected<dataset> hold_out(dataset& train, double fraction, uint64_t seed);

/// Loads (or, for "synthetic", makes) the training and test sets that `cfg`
/// names, their features as `needs` says (formats read whole, CSV and
/// click logs, and generated sets have them regardless). Errors as
/// load_idx / load_cifar10.
caf::expected<train_test> load_datasets(const data_config& cfg,
                                        data_needs needs = {});

} // namespace troupe
