// Turns arbitrary bytes into the files troupe's readers take and reads them:
// the libFuzzer targets of this folder call these functions, and so does
// tests/runtime/data/reader_corpus_test.cpp in the default build, so an input
// of tests/fuzz/corpus/ replays there exactly as the fuzzer ran it.
//
// What a successful read must satisfy (sizes match the header, labels are
// below the class count, values are finite, a checkpoint rewrites to itself,
// a config's identity survives its text form) is checked here too; a
// failure is a finding, reported in outcome::broken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace troupe::fuzz {

/// What one input did.
struct outcome {
  /// The errors the reader returned (describe()); empty on success.
  std::vector<std::string> errors;
  std::string broken; ///< the invariant a successful read broke; or empty
  /// Every error of this reader names it (the file or the config's origin).
  std::string names;
};

/// The whole input is a config file's text (parse_run_config); a config
/// that parses is also run through training_identity and back.
outcome read_config(const uint8_t* data, size_t size);

/// The input is the value of "cluster" in a config that is valid without
/// it (softmax on synthetic data), so every input reaches the cluster
/// section: nodes, chief, counts, timeouts, TLS.
outcome read_cluster_file(const uint8_t* data, size_t size);

/// Byte 0: bit 0 gzips the image file, bit 1 the label file; bytes 1-2 (big
/// endian): how many of the remaining bytes form the image file, the rest
/// is the label file (load_idx, 10 classes). A file not gzipped here may
/// still be gzip data of the input's own, which zlib detects. Read twice,
/// into memory and through an inflated copy in a cache folder, which must
/// give the same samples or the same error.
outcome read_idx(const uint8_t* data, size_t size);

/// Bytes 1-2 (big endian): how many of the bytes after byte 2 form the
/// features' .npy file, the rest is the labels' (load_npy); byte 0 is not
/// used.
outcome read_npy(const uint8_t* data, size_t size);

/// The whole input is an .npz archive whose members x_train.npy and
/// y_train.npy are read (load_npz), into memory and through a cache
/// folder, as read_idx does.
outcome read_npz(const uint8_t* data, size_t size);

/// The whole input is a CSV file whose labels are in column "label"
/// (load_csv).
outcome read_csv(const uint8_t* data, size_t size);

/// The whole input is a tab-separated click log of 2 numeric and 3
/// categorical fields (load_click_log).
outcome read_click_log(const uint8_t* data, size_t size);

/// The whole input is an embedding table's checkpoint file, read piece by
/// piece (table_file_reader).
outcome read_table_file(const uint8_t* data, size_t size);

/// Byte 0: bit 0 picks sharded (else replicated); the rest is the text a
/// checkpoint's "feeder_plan" holds (batch_plan::restore of a plan of 97
/// samples, batch 10, 4 epochs; the step is the text's own count). A plan
/// that loads must save to a text that loads to itself, and must then run
/// to its end with no sample twice in a worker's epoch.
outcome read_feeder_plan(const uint8_t* data, size_t size);

/// Byte 0: bit 0 gzips the first file, bit 1 the second, bit 2 makes two
/// files; bytes 1-2 (big endian): the first file's length when there are
/// two; the rest is the file data (load_cifar10).
outcome read_cifar(const uint8_t* data, size_t size);

/// The input is a checkpoint file: read_checkpoint_metadata, then
/// read_checkpoint, then (after a successful read) write_checkpoint of
/// what was read and a second read, which must give the same checkpoint.
outcome read_safetensors(const uint8_t* data, size_t size);

/// A reader and the corpus folder (tests/fuzz/corpus/<name>) it reads.
struct reader {
  const char* name;
  outcome (*read)(const uint8_t* data, size_t size);
};

/// Every reader above, by corpus name.
const std::vector<reader>& readers();

/// For the fuzz targets: runs `read`, and on a broken invariant prints it
/// and traps, so libFuzzer records the input.
void run_or_trap(outcome (*read)(const uint8_t*, size_t), const uint8_t* data,
                 size_t size);

} // namespace troupe::fuzz
