#include "runtime/data/click_stream.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/base/errc.hpp"
#include "runtime/data/click_lines.hpp"
#include "runtime/data/dataset.hpp"

namespace troupe {

namespace {

/// Blocks kept parsed: those a node's workers read from at once, and the
/// next block of each part the epochs' order has open, read ahead.
constexpr size_t cached_blocks = 2 * interleaved_parts + 4;
/// Parts open at once: twice those the epochs' order reads from at once
/// (each holds a buffer of 512 KiB, more only for lines that need it),
/// for the batches of a lost worker leased again.
constexpr size_t open_cursors = 2 * interleaved_parts;
/// While a part is checked, its samples are parsed this many at a time.
constexpr int64_t check_chunk = 4096;

click_data empty_set(const click_schema& schema) {
  click_data d;
  d.schema = schema;
  d.offsets.push_back(0);
  return d;
}

} // namespace

/// A part open at a place: lines.samples() samples passed.
struct click_stream::cursor {
  size_t part;
  click_lines lines;
  uint64_t used = 0;
};

click_stream::click_stream(click_schema schema, size_t block, bool check_lines)
  : schema_(schema), block_(std::max<size_t>(block, 1)),
    check_lines_(check_lines) {}

caf::expected<click_part> click_stream::open_part(const std::string& path,
                                                  int64_t first) const {
  click_part p;
  p.path = path;
  p.first = first;
  auto stamp = file_stamp::of(path);
  if (!stamp)
    return stamp.error();
  p.stamp = std::move(*stamp);
  // Checked lines are parsed into a scratch set emptied as it fills.
  auto scratch = empty_set(schema_);
  auto count = read_click_file(path, schema_, check_lines_ ? &scratch : nullptr,
                               [&] {
                                 if (scratch.count == check_chunk)
                                   scratch = empty_set(schema_);
                               });
  if (!count)
    return count.error();
  p.count = *count;
  if (p.first + p.count > int64_t{0xFFFFFFFF})
    return make_error(errc::bad_format,
                      path
                        + ": the click logs hold more than 2^32 - 1 "
                          "samples, the most one set may have");
  return p;
}

caf::expected<std::shared_ptr<click_stream>>
click_stream::open(const std::vector<std::string>& paths,
                   const click_schema& schema, size_t block, bool check_lines) {
  std::shared_ptr<click_stream> s{new click_stream(schema, block, check_lines)};
  for (auto& path : paths) {
    auto p = s->open_part(path, s->count_);
    if (!p)
      return p.error();
    s->count_ += p->count;
    s->parts_.push_back(std::move(*p));
  }
  if (s->parts_.empty())
    return make_error(errc::invalid_argument, "click logs: no files");
  return s;
}

caf::expected<int64_t>
click_stream::follow(const std::vector<std::string>& paths) const {
  lock_type lock{mutex_};
  for (size_t i = 0; i < std::min(paths.size(), parts_.size()); ++i)
    if (paths[i] != parts_[i].path)
      return make_error(errc::invalid_argument,
                        "click logs: part " + std::to_string(i) + " is "
                          + parts_[i].path + " here but " + paths[i]
                          + " in the parts to follow (parts must arrive "
                            "in name order)");
  // One caller appends at a time; readers go on meanwhile (a part is
  // opened, and checked, outside the lock).
  while (parts_.size() < paths.size()) {
    auto first = count_;
    auto& path = paths[parts_.size()];
    lock.unlock();
    auto p = open_part(path, first);
    lock.lock();
    if (!p)
      return p.error();
    if (count_ != first) // another caller appended it meanwhile
      continue;
    count_ += p->count;
    parts_.push_back(std::move(*p));
  }
  return count_;
}

int64_t click_stream::count() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return count_;
}

std::vector<click_part> click_stream::parts() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return {parts_.begin(), parts_.end()};
}

size_t click_stream::part_count() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return parts_.size();
}

click_part click_stream::part(size_t i) const {
  std::lock_guard<std::mutex> guard{mutex_};
  return parts_.at(i);
}

std::vector<size_t> click_stream::part_sizes() const {
  std::lock_guard<std::mutex> guard{mutex_};
  std::vector<size_t> out;
  for (auto& p : parts_)
    out.push_back(static_cast<size_t>(p.count));
  return out;
}

click_read_stats click_stream::stats() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return stats_;
}

click_stream::cached_block* click_stream::find(int64_t first) const {
  for (auto& c : cache_)
    if (c->first == first)
      return c.get();
  return nullptr;
}

click_stream::cached_block* click_stream::add_slot(size_t part,
                                                   int64_t first) const {
  if (cache_.size() >= cached_blocks) {
    // The least recently used block that was used; a block read ahead
    // and not used yet only when there is none (its cursor has moved on:
    // reading it again would read its part from the start).
    auto victim = cache_.end();
    auto rank = [](const cached_block& b) {
      return std::make_pair(!b.used_once, b.used);
    };
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if ((*it)->ready && (*it)->waiters == 0
          && (victim == cache_.end() || rank(**it) < rank(**victim)))
        victim = it;
    if (victim != cache_.end()) // else all are in use: one more for now
      cache_.erase(victim);
  }
  cache_.push_back(std::make_unique<cached_block>());
  auto* slot = cache_.back().get();
  slot->part = part;
  slot->first = first;
  slot->used = ++uses_;
  return slot;
}

void click_stream::fill(lock_type& lock, cached_block* slot, bool ahead) const {
  const auto& p = parts_[slot->part];
  const auto skip_to = slot->first - p.first; // the block's place in its part
  // The cursor of this part furthest along but not past the block, taken
  // out of the list while it reads.
  std::unique_ptr<cursor> c;
  bool behind = false;
  auto best = cursors_.end();
  for (auto it = cursors_.begin(); it != cursors_.end(); ++it) {
    if ((*it)->part != slot->part)
      continue;
    if ((*it)->lines.samples() > skip_to)
      behind = true;
    else if (best == cursors_.end()
             || (*it)->lines.samples() > (*best)->lines.samples())
      best = it;
  }
  const bool reopened = behind && best == cursors_.end();
  if (best != cursors_.end()) {
    c = std::move(*best);
    cursors_.erase(best);
  }
  lock.unlock();
  click_data out;
  int64_t skipped = 0, bytes = 0;
  auto result = [&]() -> caf::error {
    if (auto err = p.stamp.check())
      return err;
    if (!c) {
      auto lines = click_lines::open(p.path);
      if (!lines)
        return lines.error();
      c = std::make_unique<cursor>(cursor{slot->part, std::move(*lines), 0});
    }
    auto& lines = c->lines;
    auto offset_before = lines.file_offset();
    auto changed = [&] {
      return make_error(errc::data_changed,
                        p.path
                          + ": this part of the click logs no longer "
                            "holds the "
                          + std::to_string(p.count)
                          + " samples it held when opened (changed during "
                            "the run)");
    };
    std::string_view line;
    while (lines.samples() < skip_to) {
      auto more = lines.next(line);
      if (!more)
        return more.error();
      if (!*more)
        return changed();
      ++skipped;
    }
    auto n = std::min<int64_t>(static_cast<int64_t>(block_), p.count - skip_to);
    out = empty_set(schema_);
    out.source = p.path;
    while (out.count < n) {
      auto more = lines.next(line);
      if (!more)
        return more.error();
      if (!*more)
        return changed();
      if (auto err = parse_click_line(line, schema_, out, p.path,
                                      lines.line_no()))
        return err;
    }
    bytes = lines.file_offset() - offset_before;
    return caf::none;
  }();
  // A read that failed while the part was being rewritten reports that.
  if (result && result != errc::data_changed)
    if (auto changed = p.stamp.check())
      result = std::move(changed);
  lock.lock();
  if (c && !result && c->lines.samples() < p.count) {
    // Kept for the part's next block; read to its end, it lets its
    // buffers go.
    if (cursors_.size() >= open_cursors) {
      auto oldest = std::min_element(cursors_.begin(), cursors_.end(),
                                     [](auto& a, auto& b) {
                                       return a->used < b->used;
                                     });
      cursors_.erase(oldest);
    }
    c->used = ++uses_;
    cursors_.push_back(std::move(c));
  }
  stats_.reopened += reopened ? 1 : 0;
  stats_.skipped += skipped;
  stats_.file_bytes += bytes;
  if (!result) {
    ++stats_.blocks;
    stats_.read_ahead += ahead ? 1 : 0;
    stats_.samples += out.count;
  }
  slot->error = std::move(result);
  slot->data = std::move(out);
  slot->file_bytes = bytes;
  slot->ready = true;
  block_ready_.notify_all();
}

void click_stream::read_ahead_after(const cached_block& slot) const {
  const auto& p = parts_[slot.part];
  auto next = slot.first + static_cast<int64_t>(block_);
  if (next >= p.first + p.count || find(next) != nullptr)
    return;
  for (auto& [part, first] : ahead_)
    if (first == next)
      return;
  if (ahead_.size() >= cached_blocks / 2) // the oldest wish is stale
    ahead_.pop_front();
  ahead_.emplace_back(slot.part, next);
  ahead_wanted_.notify_one();
}

void click_stream::read_ahead_loop() const {
  lock_type lock{mutex_};
  for (;;) {
    ahead_wanted_.wait(lock, [&] { return stopping_ || !ahead_.empty(); });
    if (stopping_)
      return;
    auto [part, first] = ahead_.front();
    ahead_.pop_front();
    if (find(first) == nullptr)
      fill(lock, add_slot(part, first), true);
  }
}

click_stream::~click_stream() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  ahead_wanted_.notify_all();
  if (ahead_thread_.joinable())
    ahead_thread_.join();
}

caf::expected<click_data> click_stream::read(const uint32_t* idx, int n,
                                             click_read_stats* cost) const {
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  auto start = clock::now();
  lock_type lock{mutex_};
  if (!ahead_thread_.joinable() && !stopping_)
    ahead_thread_ = std::thread{[this] { read_ahead_loop(); }};
  double stalled = 0;
  int64_t first_use_bytes = 0;
  auto out = empty_set(schema_);
  out.source = parts_.front().path;
  const auto numeric = static_cast<size_t>(schema_.numeric);
  const auto fields = static_cast<size_t>(schema_.categorical);
  for (int k = 0; k < n; ++k) {
    auto i = static_cast<int64_t>(idx[k]);
    if (i >= count_)
      return make_error(errc::invalid_argument, "sample " + std::to_string(i)
                                                  + " of click logs of "
                                                  + std::to_string(count_));
    auto part = static_cast<size_t>(
      std::upper_bound(parts_.begin(), parts_.end(), i,
                       [](int64_t x, const click_part& p) {
                         return x < p.first;
                       })
      - parts_.begin() - 1);
    const auto& p = parts_[part];
    auto size = static_cast<int64_t>(block_);
    auto first = p.first + (i - p.first) / size * size;
    auto* slot = find(first);
    if (slot == nullptr || !slot->ready) {
      auto waited = clock::now();
      if (slot == nullptr) {
        slot = add_slot(part, first);
        ++slot->waiters;
        fill(lock, slot, false);
      } else {
        ++slot->waiters;
        block_ready_.wait(lock, [&] { return slot->ready; });
      }
      --slot->waiters;
      stalled += seconds_since(waited);
    }
    if (slot->error)
      return slot->error;
    slot->used = ++uses_;
    if (!slot->used_once) { // its cost is this call's, and its next is due
      slot->used_once = true;
      first_use_bytes += slot->file_bytes;
      read_ahead_after(*slot);
    }
    const auto& d = slot->data;
    auto j = static_cast<size_t>(i - first);
    out.labels.push_back(d.labels[j]);
    auto from = d.numeric.begin() + static_cast<ptrdiff_t>(j * numeric);
    out.numeric.insert(out.numeric.end(), from,
                       from + static_cast<ptrdiff_t>(numeric));
    for (size_t f = 0; f < fields; ++f) {
      auto [a, b] = d.field(static_cast<int64_t>(j), static_cast<int>(f));
      out.ids.insert(out.ids.end(), a, b);
      out.offsets.push_back(out.ids.size());
    }
    ++out.count;
  }
  double spent = seconds_since(start);
  stats_.seconds += spent;
  stats_.stalled += stalled;
  if (cost != nullptr) {
    cost->seconds = spent;
    cost->stalled = stalled;
    cost->file_bytes = first_use_bytes;
  }
  return out;
}

} // namespace troupe
