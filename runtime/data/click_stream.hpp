// A click-log training set read where it lies: one or many parts, gzipped
// or plain, never in memory whole. Opening it passes over every part once
// (a node that trains checks every line, as the in-memory reader does; one
// that only plans counts them); afterwards a batch's samples are read a
// block at a time: `block` consecutive samples of one part, parsed
// together and kept in a small cache, since a block serves many batches.
//
// A gzip stream cannot be entered in the middle, so a part is read from a
// cursor that only moves forward: the epoch's order
// (interleaved_order in dataset.hpp) visits each part's blocks in file
// order, and a cursor behind a block skips to it without parsing. A block
// before every cursor of its part (a batch leased again after its worker
// was lost) reopens the part.
//
// Before it reads a block, the reader checks that the block's part is
// the file it opened (file_stamp: its size and modification time): a part
// that went missing or changed during a run is named in a clear error
// instead of being read as other samples.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/data/file_stamp.hpp"

namespace troupe {

class click_lines;

struct click_part {
  std::string path;
  int64_t first = 0; ///< its first sample's index in the set
  int64_t count = 0; ///< its samples
  file_stamp stamp;  ///< the file as it was opened, which it must stay
};

/// What reading has cost so far, for metrics.
struct click_read_stats {
  int64_t blocks = 0;     ///< blocks parsed
  int64_t samples = 0;    ///< samples parsed in them
  int64_t skipped = 0;    ///< samples passed over to reach a block
  int64_t file_bytes = 0; ///< bytes read from the parts (compressed ones)
  int64_t reopened = 0;   ///< parts read again from their start
  double seconds = 0;     ///< spent reading blocks, waits on the lock included
};

class click_stream {
public:
  /// Opens `paths` (in this order) as one set. With `check_lines`, every
  /// line is parsed and its errors are load_click_log's; else lines are
  /// only counted. errc::bad_format for a part without samples, or a set
  /// of more than 2^32 - 1.
  static caf::expected<std::shared_ptr<click_stream>>
  open(const std::vector<std::string>& paths, const click_schema& schema,
       size_t block, bool check_lines);

  ~click_stream();

  int64_t count() const { return count_; }
  size_t block() const { return block_; }
  const click_schema& schema() const { return schema_; }
  const std::vector<click_part>& parts() const { return parts_; }
  /// Each part's sample count, in order: what interleaved_order cuts.
  std::vector<size_t> part_sizes() const;

  /// Samples idx[0..n) of the set as a set of n samples in that order.
  /// Safe to call from several threads. errc::data_changed naming the
  /// part when it went missing, changed or no longer holds its samples;
  /// the errors of click_lines and parse_click_line for what it holds.
  /// `cost`, when given, gets what this call read (stats() counts it too).
  caf::expected<click_data> read(const uint32_t* idx, int n,
                                 click_read_stats* cost = nullptr) const;

  click_read_stats stats() const;

private:
  struct cursor;
  struct cached_block {
    int64_t first = -1; ///< the set's index of its first sample
    click_data data;
    uint64_t used = 0;
  };

  click_stream(click_schema schema, size_t block);
  /// The block that holds sample i; read (under the lock) when not cached.
  caf::expected<const cached_block*> block_of(int64_t i) const;
  caf::expected<click_data> read_block(size_t part, int64_t first) const;

  click_schema schema_;
  size_t block_;
  int64_t count_ = 0;
  std::vector<click_part> parts_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<cursor>> cursors_;
  mutable std::vector<cached_block> cache_;
  mutable uint64_t uses_ = 0;
  mutable click_read_stats stats_;
};

} // namespace troupe
