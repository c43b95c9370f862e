// TensorBoard's event files, written from scratch: a run's scalars (loss,
// examples/s, test score) as TensorBoard reads them, so that its users see
// troupe's runs in the tool they know, with nothing of TensorFlow linked.
//
// The format (tensorflow/core/util/event.proto, summary.proto and the
// TFRecord framing of tensorflow/core/lib/io/record_writer.cc): a file of
// records, each
//   uint64 length, uint32 masked CRC-32C of those 8 bytes,
//   `length` bytes of an Event protobuf, uint32 masked CRC-32C of them
// (little-endian; masked: the CRC rotated right by 15 bits plus
// 0xa282ead8). The first Event holds file_version "brain.Event:2"; each
// scalar is an Event {wall_time (1, double), step (2, int64), summary (5)
// {value (1) {tag (1, string), simple_value (2, float)}}}.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "caf/error.hpp"

namespace troupe {

/// CRC-32C (Castagnoli) of `data`, as TFRecord and leveldb use it.
uint32_t crc32c(std::string_view data);

class tensorboard_events {
public:
  /// No file: scalar() is a no-op.
  tensorboard_events() = default;

  /// Makes folder `dir` (and its parents) and a new event file in it,
  /// `events.out.tfevents.<unix seconds>.<host>.<pid>` (one per process:
  /// a resumed run adds a file, which TensorBoard reads after the others),
  /// and writes its file_version record. errc::io_error naming the path
  /// when that fails.
  caf::error open(const std::string& dir);

  /// Appends a scalar at `step`, stamped with the wall clock, and
  /// flushes it (TensorBoard reads the file while it grows).
  void scalar(const std::string& tag, int64_t step, double value);

  /// The event file's path ("" before open).
  const std::string& path() const { return path_; }

private:
  void record(const std::string& event);

  struct closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, closer> file_;
  std::string path_;
};

} // namespace troupe
