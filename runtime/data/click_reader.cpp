// The tab-separated click-log reader (click_data.hpp says the format,
// click_lines.hpp how lines are read).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_checks.hpp"
#include "runtime/base/random.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/data/click_lines.hpp"
#include "runtime/data/dataset.hpp"
#include "runtime/data/gz_file.hpp"

namespace troupe {

namespace {

/// Chunks read at once: large enough that a chunk holds many lines.
constexpr size_t chunk_size = size_t{256} << 10;

std::string column_name(size_t column, const click_schema& s) {
  if (column == 0)
    return "column 1 (label)";
  if (column <= static_cast<size_t>(s.numeric))
    return "column " + std::to_string(column + 1) + " (numeric field "
           + std::to_string(column) + ")";
  return "column " + std::to_string(column + 1) + " (categorical field "
         + std::to_string(column - static_cast<size_t>(s.numeric)) + ")";
}

std::string columns_of(const click_schema& s) {
  return "(1 label, " + std::to_string(s.numeric) + " numeric, "
         + std::to_string(s.categorical) + " categorical)";
}

} // namespace

uint64_t click_token_id(const char* token, size_t size, int field,
                        uint64_t vocabulary) {
  uint64_t h = 0xcbf29ce484222325ull; // FNV-1a, then mixed with the field
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(token[i]);
    h *= 0x100000001b3ull;
  }
  return mix64(h ^ mix64(static_cast<uint64_t>(field) + 1)) % vocabulary;
}

// -- click_lines -------------------------------------------------------------

click_lines::click_lines(std::string path, std::unique_ptr<gz_file> file)
  : path_(std::move(path)), file_(std::move(file)) {
  // Grown to hold the longest line allowed, its end and a chunk after
  // it only when a line needs it: a streamed set keeps many files open.
  buffer_.resize(2 * chunk_size);
}

click_lines::click_lines(click_lines&&) noexcept = default;
click_lines& click_lines::operator=(click_lines&&) noexcept = default;
click_lines::~click_lines() = default;

caf::expected<click_lines> click_lines::open(const std::string& path) {
  if (auto err = check_regular(path))
    return err;
  auto file = std::make_unique<gz_file>(path);
  if (!file->is_open())
    return open_error(path);
  return click_lines{path, std::move(file)};
}

int64_t click_lines::file_offset() const {
  return file_->file_offset();
}

caf::expected<bool> click_lines::refill() {
  if (at_end_)
    return false;
  std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  if (buffer_.size() - end_ < chunk_size)
    buffer_.resize(
      std::min(2 * buffer_.size(), max_click_line + 2 + chunk_size));
  auto got = file_->read(buffer_.data() + end_, buffer_.size() - end_);
  if (got < 0 || (got == 0 && file_->ended_early()))
    return make_error(errc::bad_format,
                      path_ + ": corrupt compressed data after line "
                        + std::to_string(line_no_)
                        + (got < 0 ? "" : ": the gzip stream ends early"));
  if (got == 0)
    at_end_ = true;
  end_ += static_cast<size_t>(got);
  return got > 0;
}

caf::expected<bool> click_lines::next(std::string_view& line) {
  for (;;) {
    auto* start = buffer_.data() + begin_;
    auto* nl = static_cast<char*>(std::memchr(start, '\n', end_ - begin_));
    size_t size = nl != nullptr ? static_cast<size_t>(nl - start)
                                : end_ - begin_;
    if (nl == nullptr && !at_end_ && size <= max_click_line) {
      auto more = refill();
      if (!more)
        return more.error();
      continue;
    }
    if (nl == nullptr && size == 0)
      return false; // at the end, nothing left
    ++line_no_;
    if (size > max_click_line)
      return make_error(errc::bad_format, path_ + ":" + std::to_string(line_no_)
                                            + ": a line of more than 1 MiB");
    begin_ += size + (nl != nullptr ? 1 : 0);
    if (size > 0 && start[size - 1] == '\r')
      --size;
    if (size == 0)
      continue;
    line = std::string_view{start, size};
    ++samples_;
    return true;
  }
}

// -- one line ----------------------------------------------------------------

caf::error parse_click_line(std::string_view line, const click_schema& schema,
                            click_data& d, const std::string& path,
                            int64_t line_no) {
  const size_t columns = 1 + static_cast<size_t>(schema.numeric)
                         + static_cast<size_t>(schema.categorical);
  auto where = path + ":" + std::to_string(line_no) + ": ";
  auto bad = [&](size_t column, const std::string& what) {
    return make_error(errc::bad_format,
                      where + column_name(column, schema) + ": " + what);
  };
  std::string number;
  size_t start = 0, column = 0;
  for (;; ++column) {
    auto tab = line.find('\t', start);
    auto end = tab == std::string_view::npos ? line.size() : tab;
    if (column >= columns)
      return make_error(errc::bad_format,
                        where + "more than " + std::to_string(columns)
                          + " tab-separated columns " + columns_of(schema));
    auto field = line.substr(start, end - start);
    if (column == 0) {
      if (field != "0" && field != "1")
        return bad(column,
                   "expected 0 or 1, found \"" + std::string{field} + "\"");
      d.labels.push_back(field == "1" ? 1.f : 0.f);
    } else if (column <= static_cast<size_t>(schema.numeric)) {
      float x = 0;
      if (!field.empty()) {
        number.assign(field); // strtof needs the end of the text
        errno = 0;
        char* stop = nullptr;
        x = std::strtof(number.c_str(), &stop);
        if (stop != number.c_str() + number.size() || errno == ERANGE)
          return bad(column, "\"" + number + "\" is not a number");
        if (!std::isfinite(x))
          return bad(column, "\"" + number + "\" is not finite");
      }
      d.numeric.push_back(x);
    } else {
      int f = static_cast<int>(column) - 1 - schema.numeric;
      size_t t = 0;
      while (!field.empty()) {
        auto comma = field.find(',', t);
        auto stop = comma == std::string_view::npos ? field.size() : comma;
        if (stop == t)
          return bad(column,
                     "an empty value in \"" + std::string{field} + "\"");
        d.ids.push_back(
          click_token_id(field.data() + t, stop - t, f, schema.vocabulary));
        if (comma == std::string_view::npos)
          break;
        t = comma + 1;
      }
      d.offsets.push_back(d.ids.size());
    }
    if (tab == std::string_view::npos)
      break;
    start = tab + 1;
  }
  if (column + 1 != columns)
    return make_error(errc::bad_format,
                      where + std::to_string(column + 1) + " columns, expected "
                        + std::to_string(columns) + " " + columns_of(schema));
  ++d.count;
  return caf::none;
}

// -- whole files and sets

caf::expected<int64_t> read_click_file(const std::string& path,
                                       const click_schema& schema,
                                       click_data* parsed,
                                       const std::function<void()>& between) {
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
    if (parsed == nullptr)
      continue;
    if (auto err = parse_click_line(line, schema, *parsed, path,
                                    lines->line_no()))
      return err;
    if (between)
      between();
  }
  if (lines->samples() == 0)
    return make_error(errc::bad_format, path + ": no click lines");
  return lines->samples();
}
// ----------------------------------------------------------------

caf::expected<click_data> load_click_logs(const std::vector<std::string>& paths,
                                          const click_schema& schema) {
  click_data d;
  d.source = parts_name(paths.front(), paths.size());
  d.schema = schema;
  d.offsets.push_back(0);
  for (auto& path : paths)
    if (auto read = read_click_file(path, schema, &d); !read)
      return read.error();
  return d;
}

caf::expected<click_data> load_click_log(const std::string& path,
                                         const click_schema& schema) {
  return load_click_logs({path}, schema);
}

} // namespace troupe
