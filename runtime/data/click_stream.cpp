#include "runtime/data/click_stream.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/base/errc.hpp"
#include "runtime/data/click_lines.hpp"
#include "runtime/data/dataset.hpp"

namespace troupe {

namespace {

/// Blocks kept parsed: the few a node's workers are reading from at once.
constexpr size_t cached_blocks = 4;
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

click_stream::click_stream(click_schema schema, size_t block)
  : schema_(schema), block_(std::max<size_t>(block, 1)) {}

click_stream::~click_stream() = default;

caf::expected<std::shared_ptr<click_stream>>
click_stream::open(const std::vector<std::string>& paths,
                   const click_schema& schema, size_t block, bool check_lines) {
  std::shared_ptr<click_stream> s{new click_stream(schema, block)};
  auto scratch = empty_set(schema);
  for (auto& path : paths) {
    click_part p;
    p.path = path;
    p.first = s->count_;
    auto stamp = file_stamp::of(path);
    if (!stamp)
      return stamp.error();
    p.stamp = std::move(*stamp);
    auto lines = click_lines::open(path);
    if (!lines)
      return lines.error();
    std::string_view line;
    for (;;) {
      auto more = lines->next(line);
      if (!more)
        return more.error();
      if (!*more)
        break;
      if (!check_lines)
        continue;
      if (auto err = parse_click_line(line, schema, scratch, path,
                                      lines->line_no()))
        return err;
      if (scratch.count == check_chunk)
        scratch = empty_set(schema);
    }
    p.count = lines->samples();
    if (p.count == 0)
      return make_error(errc::bad_format, path + ": no click lines");
    s->count_ += p.count;
    if (s->count_ > int64_t{0xFFFFFFFF})
      return make_error(errc::bad_format,
                        path
                          + ": the click logs hold more than 2^32 - 1 "
                            "samples, the most one set may have");
    s->parts_.push_back(std::move(p));
  }
  if (s->parts_.empty())
    return make_error(errc::invalid_argument, "click logs: no files");
  return s;
}

std::vector<size_t> click_stream::part_sizes() const {
  std::vector<size_t> out;
  for (auto& p : parts_)
    out.push_back(static_cast<size_t>(p.count));
  return out;
}

click_read_stats click_stream::stats() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return stats_;
}

caf::expected<click_data> click_stream::read_block(size_t part,
                                                   int64_t first) const {
  const auto& p = parts_[part];
  if (auto err = p.stamp.check())
    return err;
  auto skip_to = first - p.first; // the block's place in its part
  // The cursor of this part furthest along but not past the block.
  cursor* c = nullptr;
  bool behind = false;
  for (auto& each : cursors_) {
    if (each->part != part)
      continue;
    if (each->lines.samples() > skip_to)
      behind = true;
    else if (c == nullptr || each->lines.samples() > c->lines.samples())
      c = each.get();
  }
  if (c == nullptr) {
    auto lines = click_lines::open(p.path);
    if (!lines)
      return lines.error();
    stats_.reopened += behind ? 1 : 0;
    if (cursors_.size() >= open_cursors) {
      auto oldest = std::min_element(cursors_.begin(), cursors_.end(),
                                     [](auto& a, auto& b) {
                                       return a->used < b->used;
                                     });
      cursors_.erase(oldest);
    }
    cursors_.push_back(
      std::make_unique<cursor>(cursor{part, std::move(*lines), 0}));
    c = cursors_.back().get();
  }
  c->used = ++uses_;
  auto& lines = c->lines;
  auto offset_before = lines.file_offset();
  auto changed = [&] {
    return make_error(errc::data_changed,
                      p.path
                        + ": this part of the click logs no longer "
                          "holds the "
                        + std::to_string(p.count)
                        + " samples it held when opened (changed during the "
                          "run)");
  };
  std::string_view line;
  while (lines.samples() < skip_to) {
    auto more = lines.next(line);
    if (!more)
      return more.error();
    if (!*more)
      return changed();
    ++stats_.skipped;
  }
  auto n = std::min<int64_t>(static_cast<int64_t>(block_), p.count - skip_to);
  auto out = empty_set(schema_);
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
  stats_.file_bytes += lines.file_offset() - offset_before;
  stats_.samples += n;
  ++stats_.blocks;
  if (lines.samples() == p.count) // read to its end: let its buffers go
    cursors_.erase(std::find_if(cursors_.begin(), cursors_.end(),
                                [&](auto& each) { return each.get() == c; }));
  return out;
}

caf::expected<const click_stream::cached_block*>
click_stream::block_of(int64_t i) const {
  auto part = static_cast<size_t>(
    std::upper_bound(parts_.begin(), parts_.end(), i,
                     [](int64_t x, const click_part& p) { return x < p.first; })
    - parts_.begin() - 1);
  const auto& p = parts_[part];
  auto size = static_cast<int64_t>(block_);
  auto first = p.first + (i - p.first) / size * size;
  for (auto& c : cache_)
    if (c.first == first) {
      c.used = ++uses_;
      return &c;
    }
  auto data = read_block(part, first);
  if (!data)
    return data.error();
  cached_block* slot = nullptr;
  if (cache_.size() < cached_blocks)
    slot = &cache_.emplace_back();
  else
    slot = &*std::min_element(cache_.begin(), cache_.end(),
                              [](auto& x, auto& y) { return x.used < y.used; });
  slot->first = first;
  slot->data = std::move(*data);
  slot->used = ++uses_;
  return slot;
}

caf::expected<click_data> click_stream::read(const uint32_t* idx, int n,
                                             click_read_stats* cost) const {
  auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{mutex_};
  auto before = stats_;
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
    auto b = block_of(i);
    if (!b)
      return b.error();
    const auto& d = (*b)->data;
    auto j = static_cast<size_t>(i - (*b)->first);
    out.labels.push_back(d.labels[j]);
    out.numeric.insert(out.numeric.end(), d.numeric.begin() + j * numeric,
                       d.numeric.begin() + (j + 1) * numeric);
    for (size_t f = 0; f < fields; ++f) {
      auto [from, to] = d.field(static_cast<int64_t>(j), static_cast<int>(f));
      out.ids.insert(out.ids.end(), from, to);
      out.offsets.push_back(out.ids.size());
    }
    ++out.count;
  }
  stats_.seconds += std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  if (cost != nullptr) {
    cost->blocks = stats_.blocks - before.blocks;
    cost->samples = stats_.samples - before.samples;
    cost->skipped = stats_.skipped - before.skipped;
    cost->file_bytes = stats_.file_bytes - before.file_bytes;
    cost->reopened = stats_.reopened - before.reopened;
    cost->seconds = stats_.seconds - before.seconds;
  }
  return out;
}

} // namespace troupe
