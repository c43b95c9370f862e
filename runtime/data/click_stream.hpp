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
// was lost) reopens the part. Since a part's blocks come in file order, a
// thread reads each part's next block ahead while the steps train on the
// one before.
//
// Before it reads a block, the reader checks that the block's part is
// the file it opened (file_stamp: its size and modification time): a part
// that went missing or changed during a run is named in a clear error
// instead of being read as other samples.
//
// A set that follows a growing folder (data.follow) takes more parts while
// it is read: follow() appends them at its end, which moves no sample
// that was there before. The parts are kept in a deque so that a block
// being read keeps its part while another is appended.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
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
  int64_t blocks = 0;     ///< blocks parsed, read ahead or not
  int64_t read_ahead = 0; ///< of which by the read-ahead thread
  int64_t samples = 0;    ///< samples parsed in them
  int64_t skipped = 0;    ///< samples passed over to reach a block
  int64_t file_bytes = 0; ///< bytes read from the parts (compressed ones)
  int64_t reopened = 0;   ///< parts read again from their start
  double seconds = 0;     ///< spent in read(), its waits included
  double stalled = 0;     ///< of which waiting for a block to be read
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

  /// Stops the read-ahead thread.
  ~click_stream();
  click_stream(const click_stream&) = delete;
  click_stream& operator=(const click_stream&) = delete;

  int64_t count() const;
  size_t block() const { return block_; }
  const click_schema& schema() const { return schema_; }
  /// Its parts now, in order; how many, and part `i` (< part_count()).
  std::vector<click_part> parts() const;
  size_t part_count() const;
  click_part part(size_t i) const;
  /// Each part's sample count, in order: what interleaved_order cuts.
  std::vector<size_t> part_sizes() const;

  /// Samples idx[0..n) of the set as a set of n samples in that order.
  /// Safe to call from several threads. errc::data_changed naming the
  /// part when it went missing, changed or no longer holds its samples;
  /// the errors of click_lines and parse_click_line for what it holds.
  /// `cost`, when given, gets what this call read: its waits, and the
  /// bytes of the blocks it was the first to use (stats() counts all).
  ///
  /// The first call starts a read-ahead thread: once a block of a part is
  /// used, the part's next block is read in the background, which the
  /// epochs' order will ask for next of that part.
  /// The set grows (data.follow): `paths` names every part it holds, in
  /// order; those past its parts now are opened (checked as open()
  /// checked them) and appended. Safe alongside read(). Returns the
  /// samples it holds. errc::invalid_argument, nothing appended, where
  /// `paths` does not begin with the parts it holds (a part named
  /// otherwise than before); open()'s errors for a part it cannot take.
  /// Const since a set that grows keeps every sample where it was.
  caf::expected<int64_t> follow(const std::vector<std::string>& paths) const;

  caf::expected<click_data> read(const uint32_t* idx, int n,
                                 click_read_stats* cost = nullptr) const;

  click_read_stats stats() const;

private:
  struct cursor;
  struct cached_block {
    int64_t first = -1; ///< the set's index of its first sample
    size_t part = 0;
    bool ready = false; ///< read (or failed: error)
    int waiters = 0;    ///< read() calls waiting for it: kept
    caf::error error;
    click_data data;
    int64_t file_bytes = 0; ///< what reading it cost, for the first user
    bool used_once = false;
    uint64_t used = 0;
  };
  using lock_type = std::unique_lock<std::mutex>;

  click_stream(click_schema schema, size_t block, bool check_lines);
  /// Opens `path` as the part after those it holds (not appended yet).
  caf::expected<click_part> open_part(const std::string& path,
                                      int64_t first) const;
  /// Under the lock: the cached (or loading) block at `first`, or null.
  cached_block* find(int64_t first) const;
  /// Under the lock: a new slot for the block at `first`, evicting the
  /// least recently used block that is read and awaited by no one.
  cached_block* add_slot(size_t part, int64_t first) const;
  /// Reads `slot`'s block, unlocking `lock` while it does.
  void fill(lock_type& lock, cached_block* slot, bool ahead) const;
  /// Under the lock: asks the read-ahead thread for the block after
  /// `slot`'s, where its part has one that is not cached.
  void read_ahead_after(const cached_block& slot) const;
  void read_ahead_loop() const;

  click_schema schema_;
  size_t block_;
  bool check_lines_;
  // Under mutex_ once the set is open (follow() appends).
  mutable int64_t count_ = 0;
  mutable std::deque<click_part> parts_;
  mutable std::mutex mutex_;
  mutable std::condition_variable block_ready_, ahead_wanted_;
  mutable std::vector<std::unique_ptr<cursor>> cursors_;
  mutable std::vector<std::unique_ptr<cached_block>> cache_;
  mutable std::deque<std::pair<size_t, int64_t>> ahead_; ///< part, first
  mutable std::thread ahead_thread_;
  mutable bool stopping_ = false;
  mutable uint64_t uses_ = 0;
  mutable click_read_stats stats_;
};

} // namespace troupe
