// The tab-separated click-log reader (click_data.hpp says the format).
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "runtime/data/click_data.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/file_checks.hpp"
#include "runtime/base/random.hpp"

namespace troupe {

namespace {

/// A line longer than this is refused rather than read into memory whole.
constexpr size_t max_line = size_t{1} << 20;

std::string column_name(size_t column, const click_schema& s) {
  if (column == 0)
    return "column 1 (label)";
  if (column <= static_cast<size_t>(s.numeric))
    return "column " + std::to_string(column + 1) + " (numeric field "
           + std::to_string(column) + ")";
  return "column " + std::to_string(column + 1) + " (categorical field "
         + std::to_string(column - static_cast<size_t>(s.numeric)) + ")";
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

caf::expected<click_data> load_click_log(const std::string& path,
                                         const click_schema& schema) {
  if (auto err = check_regular(path))
    return err;
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_error(errc::io_error, path + ": cannot open");
  click_data d;
  d.source = path;
  d.schema = schema;
  d.offsets.push_back(0);
  const size_t columns = 1 + static_cast<size_t>(schema.numeric)
                         + static_cast<size_t>(schema.categorical);
  std::string line;
  int64_t line_no = 0;
  auto bad = [&](size_t column, const std::string& what) {
    return make_error(errc::bad_format,
                      path + ":" + std::to_string(line_no) + ": "
                        + column_name(column, schema) + ": " + what);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.size() > max_line)
      return make_error(errc::bad_format,
                        path + ":" + std::to_string(line_no)
                          + ": a line of more than 1 MiB");
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty())
      continue;
    size_t start = 0, column = 0;
    for (;; ++column) {
      auto tab = line.find('\t', start);
      auto end = tab == std::string::npos ? line.size() : tab;
      if (column >= columns)
        return make_error(errc::bad_format,
                          path + ":" + std::to_string(line_no) + ": more than "
                            + std::to_string(columns) + " tab-separated "
                            "columns (1 label, "
                            + std::to_string(schema.numeric) + " numeric, "
                            + std::to_string(schema.categorical)
                            + " categorical)");
      std::string field = line.substr(start, end - start);
      if (column == 0) {
        if (field != "0" && field != "1")
          return bad(column, "expected 0 or 1, found \"" + field + "\"");
        d.labels.push_back(field == "1" ? 1.f : 0.f);
      } else if (column <= static_cast<size_t>(schema.numeric)) {
        float x = 0;
        if (!field.empty()) {
          errno = 0;
          char* stop = nullptr;
          x = std::strtof(field.c_str(), &stop);
          if (stop != field.c_str() + field.size() || errno == ERANGE)
            return bad(column, "\"" + field + "\" is not a number");
          if (!std::isfinite(x))
            return bad(column, "\"" + field + "\" is not finite");
        }
        d.numeric.push_back(x);
      } else {
        int f = static_cast<int>(column) - 1 - schema.numeric;
        size_t t = 0;
        while (!field.empty()) {
          auto comma = field.find(',', t);
          auto stop = comma == std::string::npos ? field.size() : comma;
          if (stop == t)
            return bad(column, "an empty value in \"" + field + "\"");
          d.ids.push_back(click_token_id(field.data() + t, stop - t, f,
                                         schema.vocabulary));
          if (comma == std::string::npos)
            break;
          t = comma + 1;
        }
        d.offsets.push_back(d.ids.size());
      }
      if (tab == std::string::npos)
        break;
      start = tab + 1;
    }
    if (column + 1 != columns)
      return make_error(errc::bad_format,
                        path + ":" + std::to_string(line_no) + ": "
                          + std::to_string(column + 1) + " columns, expected "
                          + std::to_string(columns) + " (1 label, "
                          + std::to_string(schema.numeric) + " numeric, "
                          + std::to_string(schema.categorical)
                          + " categorical)");
    ++d.count;
  }
  if (in.bad())
    return make_error(errc::io_error, path + ": read error");
  if (d.count == 0)
    return make_error(errc::bad_format, path + ": no click lines");
  return d;
}

} // namespace troupe
