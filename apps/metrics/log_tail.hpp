// The chief's log, kept: a stream buffer that writes every byte through to
// the process's output and keeps the last lines, each with its time, for
// the metrics port's /api/log and the page's events and log tail. Writers
// on several threads (the chief, a signal's thread, the metrics port's
// start) are serialised here.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

namespace troupe {

class log_tail : public std::streambuf {
public:
  struct line {
    int64_t seq = 0;     ///< 1 for the first line written, then on
    int64_t unix_ms = 0; ///< when its end was written
    std::string text;    ///< without its newline; cut at max_line_bytes
  };

  /// Writes through to `through` (null: keeps the lines only); keeps the
  /// last `keep` lines.
  explicit log_tail(std::streambuf* through, size_t keep = 1000);

  /// The lines kept whose seq is past `after`, oldest first, at most
  /// `most` (the newest of them).
  std::vector<line> since(int64_t after, size_t most = 1000) const;

  /// When this log began (unix ms): a chief started again begins anew.
  int64_t started_unix_ms() const { return started_unix_ms_; }

  static constexpr size_t max_line_bytes = 2000;

protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

private:
  void take(const char* s, size_t n); ///< with mutex_ held

  std::streambuf* through_;
  size_t keep_;
  mutable std::mutex mutex_;
  std::string partial_; ///< the line being written
  std::deque<line> lines_;
  int64_t next_seq_ = 1;
  int64_t started_unix_ms_;
};

/// A process's log, kept for its metrics port when it has one: with
/// `keep`, lines go through a log_tail to `out` (null: kept only);
/// without, straight to `out`. Lives as long as the run writes to it.
class kept_log {
public:
  kept_log(bool keep, std::ostream* out)
    : tail_(keep ? std::make_shared<log_tail>(out ? out->rdbuf() : nullptr)
                 : nullptr),
      through_(tail_.get()), out_(tail_ ? &through_ : out) {}

  kept_log(const kept_log&) = delete;
  kept_log& operator=(const kept_log&) = delete;

  /// Where the run writes (null: nowhere).
  std::ostream* stream() { return out_; }
  /// The lines kept (null: none are).
  const std::shared_ptr<log_tail>& tail() const { return tail_; }

private:
  std::shared_ptr<log_tail> tail_;
  std::ostream through_; ///< into tail_, unused without it
  std::ostream* out_;
};

} // namespace troupe
