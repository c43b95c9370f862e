#include "apps/metrics/log_tail.hpp"

#include <algorithm>
#include <chrono>

namespace troupe {

namespace {

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace

log_tail::log_tail(std::streambuf* through, size_t keep)
  : through_(through), keep_(std::max<size_t>(keep, 1)),
    started_unix_ms_(unix_ms_now()) {}

std::vector<log_tail::line> log_tail::since(int64_t after, size_t most) const {
  std::lock_guard<std::mutex> guard{mutex_};
  std::vector<line> out;
  for (auto& l : lines_)
    if (l.seq > after)
      out.push_back(l);
  if (out.size() > most)
    out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(most));
  return out;
}

void log_tail::take(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (s[i] != '\n') {
      if (partial_.size() < max_line_bytes)
        partial_ += s[i];
      continue;
    }
    lines_.push_back({next_seq_++, unix_ms_now(), std::move(partial_)});
    partial_.clear();
    if (lines_.size() > keep_)
      lines_.pop_front();
  }
}

log_tail::int_type log_tail::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof()))
    return traits_type::not_eof(c);
  char ch = traits_type::to_char_type(c);
  std::lock_guard<std::mutex> guard{mutex_};
  take(&ch, 1);
  if (through_ != nullptr)
    return through_->sputc(ch);
  return c;
}

std::streamsize log_tail::xsputn(const char* s, std::streamsize n) {
  std::lock_guard<std::mutex> guard{mutex_};
  take(s, static_cast<size_t>(n));
  return through_ != nullptr ? through_->sputn(s, n) : n;
}

int log_tail::sync() {
  std::lock_guard<std::mutex> guard{mutex_};
  return through_ != nullptr ? through_->pubsync() : 0;
}

} // namespace troupe
