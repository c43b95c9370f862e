// What the readers of JSON files (runtime/config/config.cpp, the checkpoint
// header in runtime/checkpoint/checkpoint.cpp) do before and after nlohmann
// parses: bound the nesting, and keep messages that quote the file on one line.
#pragma once

#include <cstddef>
#include <string>

namespace troupe {

/// Whether the JSON text [first, last) opens more than `max_depth` arrays
/// and objects inside one another (brackets inside strings do not count).
///
/// Checked on the text, before parsing, rather than with a parser
/// callback: with a callback, nlohmann 3.11 scans the enclosing container
/// each time an object ends, so N objects in one array or object cost
/// N^2 (a 16 MB checkpoint header of 200,000 tensors parsed for over an
/// hour). Exact for valid JSON; for invalid JSON the parser stops at the
/// first error, inside a prefix this scan measured the same way.
inline bool nested_deeper_than(const char* first, const char* last,
                               int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (const char* p = first; p != last; ++p) {
    char c = *p;
    if (in_string) {
      if (c == '\\' && p + 1 != last)
        ++p; // the escaped character, which may be a quote
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

/// `text` with control characters written as escapes (\n, \t, \x01), so
/// that a message quoting a key or value of a file stays one line.
inline std::string printable(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      out += std::string{"\\x"} + hex[c >> 4] + hex[c & 15];
    else
      out += static_cast<char>(c);
  }
  return out;
}

/// `text` as a JSON string literal, quotes included.
inline std::string json_quoted(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      out += std::string{"\\"} + static_cast<char>(c);
    else if (c < 0x20)
      out += std::string{"\\u00"} + hex[c >> 4] + hex[c & 15];
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

} // namespace troupe
