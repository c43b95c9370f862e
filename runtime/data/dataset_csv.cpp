// CSV datasets: a header row naming the columns, one sample per line after
// it. The label column (or, for float targets, columns) is named in the
// config; every other column is a feature. Quoting follows RFC 4180 within a
// line (a quoted field may hold commas and "" for a quote, not a line break),
// which is what pandas' to_csv and Python's csv module write for numeric
// tables.
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
  std::vector<std::string> columns;
  if (!label_column.empty())
    columns.push_back(label_column);
  return load_csv(path, columns, target_kind::classes);
}

caf::expected<dataset> load_csv(const std::string& path,
                                const std::vector<std::string>& label_columns,
                                target_kind targets) {
  if (auto err = check_regular(path))
    return err;
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return open_error(path);
  auto bad = [&](int64_t line, const std::string& what) {
    return make_error(errc::bad_format,
                      path + ":" + std::to_string(line) + ": " + what);
  };
  const bool classes = targets == target_kind::classes;
  if (classes ? label_columns.size() > 1 : label_columns.empty())
    return make_error(errc::invalid_config,
                      path + ": " + describe(targets) + " are read from "
                        + (classes ? "one column" : "one or more columns")
                        + ", not " + std::to_string(label_columns.size()));
  dataset out;
  std::vector<float> values; // the features, sample after sample
  out.source = path;
  std::vector<std::string> header, fields;
  // Per column: its place among the targets, or -1 for a feature.
  std::vector<int> target_of;
  std::string line;
  int64_t number = 0;
  int64_t largest = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.size() > max_line)
      return bad(number,
                 "a line of more than " + std::to_string(max_line) + " bytes");
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
      target_of.assign(header.size(), -1);
      for (size_t k = 0; k < label_columns.size(); ++k) {
        const auto& name = label_columns[k];
        auto it = std::find(header.begin(), header.end(), name);
        if (it == header.end())
          return bad(number, "no column named \"" + name + "\" for the "
                               + (classes ? "labels" : "targets")
                               + " (data.label_column)");
        auto& slot = target_of[static_cast<size_t>(it - header.begin())];
        if (slot >= 0)
          return bad(number, "column \"" + name
                               + "\" is named twice in data.label_column");
        slot = static_cast<int>(k);
      }
      if (!label_columns.empty() && header.size() <= label_columns.size())
        return bad(number, "no feature columns beside the labels");
      continue;
    }
    if (fields.size() != header.size())
      return bad(number, std::to_string(fields.size())
                           + " fields, the header "
                             "names "
                           + std::to_string(header.size()));
    if ((values.size() + out.targets.size() + header.size())
        > max_dataset_values)
      return bad(number,
                 "more than " + std::to_string(max_dataset_values) + " values");
    const size_t row_targets = out.targets.size();
    if (!classes)
      out.targets.resize(row_targets + label_columns.size());
    for (size_t c = 0; c < fields.size(); ++c) {
      auto text = trimmed(fields[c]);
      auto where = "column \"" + header[c] + "\"";
      if (text.empty())
        return bad(number, where + " is empty");
      char* end = nullptr;
      errno = 0;
      if (target_of[c] >= 0 && !classes) {
        float v = std::strtof(text.c_str(), &end);
        if (*end != '\0')
          return bad(number,
                     where + ": target \"" + text + "\" is not a number");
        if (!std::isfinite(v))
          return bad(number, where + ": target \"" + text
                               + "\" is not finite (or too large for "
                                 "float32)");
        if (targets == target_kind::probabilities && !(v >= 0.f && v <= 1.f))
          return bad(number, where + ": target " + text
                               + "; binary cross-entropy needs targets in "
                                 "[0, 1]");
        out.targets[row_targets + static_cast<size_t>(target_of[c])] = v;
      } else if (target_of[c] >= 0) {
        long long v = std::strtoll(text.c_str(), &end, 10);
        if (*end != '\0' || errno == ERANGE)
          return bad(number,
                     where + ": label \"" + text + "\" is not an integer");
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
        values.push_back(v);
      }
    }
  }
  if (in.bad())
    return make_error(errc::io_error, path + ": read error");
  if (header.empty())
    return make_error(errc::bad_format, path
                                          + ": empty (expected a header "
                                            "row naming the columns)");
  auto features = header.size() - label_columns.size();
  if (values.empty())
    return make_error(errc::bad_format, path + ": a header but no samples");
  out.count = static_cast<int64_t>(values.size() / features);
  out.features = feature_store::of_floats(std::move(values), features);
  out.height = 1;
  out.width = static_cast<int>(features);
  out.channels = 1;
  if (!classes)
    out.classes = static_cast<int>(label_columns.size());
  else
    out.classes = label_columns.empty() ? 0 : static_cast<int>(largest) + 1;
  return out;
}

} // namespace troupe
