// CSV datasets: a header row naming the columns, one sample per line after
// it. The label column is named in the config; every other column is a
// feature. Quoting follows RFC 4180 within a line (a quoted field may hold
// commas and "" for a quote, not a line break), which is what pandas'
// to_csv and Python's csv module write for numeric tables.
#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_checks.hpp"

namespace troupe {

namespace {

/// A line longer than this is refused rather than read into memory whole.
constexpr size_t max_line = size_t{1} << 24;

/// Splits one line into fields; an error text for a broken quote.
std::string split(const std::string& line, std::vector<std::string>& out) {
  out.clear();
  std::string field;
  size_t i = 0;
  for (;;) {
    field.clear();
    if (i < line.size() && line[i] == '"') {
      ++i;
      for (;;) {
        if (i >= line.size())
          return "a quoted field is not closed";
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      if (i < line.size() && line[i] != ',')
        return "text after a closing quote";
    } else {
      auto comma = line.find(',', i);
      auto end = comma == std::string::npos ? line.size() : comma;
      field.assign(line, i, end - i);
      if (field.find('"') != std::string::npos)
        return "a quote inside an unquoted field";
      i = end;
    }
    out.push_back(field);
    if (i >= line.size())
      return {};
    ++i; // the comma
  }
}

std::string trimmed(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return {};
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

} // namespace

caf::expected<dataset> load_csv(const std::string& path,
                                const std::string& label_column) {
  if (auto err = check_regular(path))
    return err;
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return open_error(path);
  auto bad = [&](int64_t line, const std::string& what) {
    return make_error(errc::bad_format,
                      path + ":" + std::to_string(line) + ": " + what);
  };
  dataset out;
  out.source = path;
  std::vector<std::string> header, fields;
  size_t label_at = 0;
  std::string line;
  int64_t number = 0;
  int64_t largest = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.size() > max_line)
      return bad(number, "a line of more than " + std::to_string(max_line)
                           + " bytes");
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (trimmed(line).empty())
      continue;
    if (auto err = split(line, fields); !err.empty())
      return bad(number, err);
    if (header.empty()) {
      header = fields;
      std::set<std::string> seen;
      for (auto& name : header) {
        name = trimmed(name);
        if (!seen.insert(name).second)
          return bad(number, "column \"" + name + "\" is named twice");
      }
      if (label_column.empty()) { // features only
        label_at = header.size();
        continue;
      }
      auto it = std::find(header.begin(), header.end(), label_column);
      if (it == header.end())
        return bad(number, "no column named \"" + label_column
                             + "\" for the labels (data.label_column)");
      if (header.size() < 2)
        return bad(number, "no feature columns beside the labels");
      label_at = static_cast<size_t>(it - header.begin());
      continue;
    }
    if (fields.size() != header.size())
      return bad(number, std::to_string(fields.size()) + " fields, the header "
                           "names " + std::to_string(header.size()));
    if ((out.images.size() + header.size()) > max_dataset_values)
      return bad(number, "more than " + std::to_string(max_dataset_values)
                           + " values");
    for (size_t c = 0; c < fields.size(); ++c) {
      auto text = trimmed(fields[c]);
      auto where = "column \"" + header[c] + "\"";
      if (text.empty())
        return bad(number, where + " is empty");
      char* end = nullptr;
      errno = 0;
      if (c == label_at) {
        long long v = std::strtoll(text.c_str(), &end, 10);
        if (*end != '\0' || errno == ERANGE)
          return bad(number, where + ": label \"" + text
                               + "\" is not an integer");
        if (v < 0 || v >= max_classes)
          return bad(number, where + ": label " + text + " (labels are 0.."
                               + std::to_string(max_classes - 1) + ")");
        out.labels.push_back(static_cast<int32_t>(v));
        largest = std::max<int64_t>(largest, v);
      } else {
        float v = std::strtof(text.c_str(), &end);
        if (*end != '\0')
          return bad(number, where + ": \"" + text + "\" is not a number");
        if (!std::isfinite(v))
          return bad(number, where + ": \"" + text
                               + "\" is not finite (or too large for "
                                 "float32)");
        out.images.push_back(v);
      }
    }
  }
  if (in.bad())
    return make_error(errc::io_error, path + ": read error");
  if (header.empty())
    return make_error(errc::bad_format, path + ": empty (expected a header "
                                               "row naming the columns)");
  auto features = header.size() - (label_at < header.size() ? 1 : 0);
  if (out.images.empty())
    return make_error(errc::bad_format, path + ": a header but no samples");
  out.count = static_cast<int64_t>(out.images.size() / features);
  out.height = 1;
  out.width = static_cast<int>(features);
  out.channels = 1;
  out.classes = label_at < header.size() ? static_cast<int>(largest) + 1 : 0;
  return out;
}

} // namespace troupe
