// Click-log text as lines, and one line as a sample: what the reader that
// holds a set in memory (load_click_logs) and the one that streams it
// (click_stream) share. The files may be gzipped or plain (zlib reads
// both); they are read in chunks, never whole.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "caf/error.hpp"
#include "caf/expected.hpp"
#include "runtime/data/click_data.hpp"

namespace troupe {

class gz_file;

/// A line longer than this is refused rather than read into memory whole.
constexpr size_t max_click_line = size_t{1} << 20;

class click_lines {
public:
  /// Opens `path`: errc::file_not_found, errc::io_error for what cannot be
  /// opened or is not a regular file.
  static caf::expected<click_lines> open(const std::string& path);

  click_lines(click_lines&&) noexcept;
  click_lines& operator=(click_lines&&) noexcept;
  ~click_lines();

  /// The next line that is not blank into `line` (without its line end,
  /// LF or CRLF), valid until the next call; false at the end of the file.
  /// errc::bad_format, naming the file and the line, for a line of more
  /// than max_click_line bytes, or a gzip stream that is corrupt or cut.
  caf::expected<bool> next(std::string_view& line);

  /// The 1-based line number of the line last returned (blank lines
  /// counted), for messages.
  int64_t line_no() const { return line_no_; }
  /// Lines returned so far: the samples passed.
  int64_t samples() const { return samples_; }
  /// Bytes of the file read so far (compressed ones for a gzip file).
  int64_t file_offset() const;
  const std::string& path() const { return path_; }

private:
  click_lines(std::string path, std::unique_ptr<gz_file> file);
  /// Moves the unread rest to the front and reads more after it; false
  /// at the end of the file.
  caf::expected<bool> refill();

  std::string path_;
  std::unique_ptr<gz_file> file_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  bool at_end_ = false;
  int64_t line_no_ = 0, samples_ = 0;
};

/// Appends one line (`path`:`line_no` for messages) as a sample of
/// `schema` to `out`: its label, numeric fields and categorical ids.
/// errc::bad_format naming the file, the line and the column: a wrong
/// number of columns, a label other than 0 or 1, a number that is not one
/// or is not finite, an empty token. `out` may hold part of the line
/// after an error.
caf::error parse_click_line(std::string_view line, const click_schema& schema,
                            click_data& out, const std::string& path,
                            int64_t line_no);

/// Reads every line of the click log `path` once, parsing each into
/// `parsed` as parse_click_line does, or, with `parsed` null, only
/// counting them; returns the samples. The errors of click_lines and
/// parse_click_line, and errc::bad_format for a file without samples.
/// `parsed` may be emptied (see click_stream::open) by `between`, called
/// after each line.
caf::expected<int64_t>
read_click_file(const std::string& path, const click_schema& schema,
                click_data* parsed,
                const std::function<void()>& between = nullptr);

/// Reads the click logs `paths`, gzipped or plain, one after another into
/// memory. Errors as load_click_log, and naming the part.
caf::expected<click_data> load_click_logs(const std::vector<std::string>& paths,
                                          const click_schema& schema);

} // namespace troupe
