// NumPy's .npy format (numpy.lib.format): the magic "\x93NUMPY", a version
// byte pair, the header's length (2 bytes little endian in version 1, 4 in
// versions 2 and 3), then the header, a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }, and
// the array's bytes in C order. Only what np.save writes for plain numeric
// arrays is accepted; anything else (object or structured dtypes, Fortran
// order, big-endian data) is refused with the reason, never guessed at.
#include "runtime/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sys/stat.h>

#include "runtime/errc.hpp"
#include "runtime/file_checks.hpp"

namespace troupe {

namespace {

constexpr char magic[] = "\x93NUMPY";
constexpr size_t magic_size = 6;
/// np.save pads headers to 64 bytes and numpy refuses ones over 10 KiB
/// unless told otherwise; a wider shape tuple still fits far below this.
constexpr uint32_t max_header = 1 << 16;

/// The element types troupe reads.
enum class element { f4, f8, u1, i1, i2, u2, i4, u4, i8, u8 };

struct npy_header {
  element type = element::f4;
  size_t item_size = 4;
  std::vector<uint64_t> shape;
};

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

caf::error bad(const std::string& path, const std::string& what) {
  return make_error(errc::bad_format, path + ": " + what);
}

/// The header dict, parsed as far as np.save writes it: string keys with
/// string, boolean or integer-tuple values.
class dict_parser {
public:
  explicit dict_parser(const std::string& text) : s_(text) {}

  /// Fills descr, fortran and shape; an error text on anything else.
  std::optional<std::string> parse(std::string& descr, bool& fortran,
                                   std::vector<uint64_t>& shape,
                                   bool& has_descr, bool& has_fortran,
                                   bool& has_shape) {
    skip();
    if (!eat('{'))
      return "the header is not a Python dict";
    for (;;) {
      skip();
      if (eat('}'))
        break;
      std::string key;
      if (!quoted(key))
        return "expected a quoted key in the header at offset "
               + std::to_string(i_);
      skip();
      if (!eat(':'))
        return "expected ':' after '" + key + "' in the header";
      skip();
      if (key == "descr") {
        if (!quoted(descr))
          return "'descr' is not a string (structured dtypes are not read)";
        has_descr = true;
      } else if (key == "fortran_order") {
        if (s_.compare(i_, 4, "True") == 0) {
          fortran = true;
          i_ += 4;
        } else if (s_.compare(i_, 5, "False") == 0) {
          fortran = false;
          i_ += 5;
        } else {
          return "'fortran_order' is neither True nor False";
        }
        has_fortran = true;
      } else if (key == "shape") {
        if (auto err = tuple(shape))
          return err;
        has_shape = true;
      } else {
        return "unknown key '" + key + "' in the header";
      }
      skip();
      if (eat(','))
        continue;
      skip();
      if (eat('}'))
        break;
      return "expected ',' or '}' in the header at offset "
             + std::to_string(i_);
    }
    skip();
    if (i_ != s_.size())
      return "unexpected text after the header's dict";
    return std::nullopt;
  }

private:
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n'))
      ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool quoted(std::string& out) {
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
      return false;
    char q = s_[i_++];
    auto end = s_.find(q, i_);
    if (end == std::string::npos || end - i_ > 64)
      return false;
    out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return true;
  }
  std::optional<std::string> tuple(std::vector<uint64_t>& out) {
    if (!eat('('))
      return "'shape' is not a tuple";
    for (;;) {
      skip();
      if (eat(')'))
        return std::nullopt;
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9')
        return "'shape' holds something other than sizes";
      uint64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (uint64_t{1} << 40))
          return "a size in 'shape' is too large";
        v = v * 10 + static_cast<uint64_t>(s_[i_++] - '0');
      }
      if (out.size() >= 8)
        return "'shape' has more than 8 dimensions";
      out.push_back(v);
      skip();
      if (eat(','))
        continue;
      skip();
      if (eat(')'))
        return std::nullopt;
      return "expected ',' or ')' in 'shape'";
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

/// '<f4' and friends; '|' and '=' (native, little endian on every machine
/// troupe builds for) count as little endian for one-byte and wider types.
std::optional<std::pair<element, size_t>> element_of(const std::string& d) {
  if (d.size() < 3 || (d[0] != '<' && d[0] != '|' && d[0] != '='))
    return std::nullopt;
  auto t = d.substr(1);
  static const std::pair<const char*, std::pair<element, size_t>> known[] = {
    {"f4", {element::f4, 4}}, {"f8", {element::f8, 8}},
    {"u1", {element::u1, 1}}, {"i1", {element::i1, 1}},
    {"i2", {element::i2, 2}}, {"u2", {element::u2, 2}},
    {"i4", {element::i4, 4}}, {"u4", {element::u4, 4}},
    {"i8", {element::i8, 8}}, {"u8", {element::u8, 8}}};
  for (auto& [name, e] : known)
    if (t == name)
      return e;
  return std::nullopt;
}

caf::expected<npy_header> read_header(std::FILE* f, const std::string& path) {
  unsigned char lead[10];
  auto got = std::fread(lead, 1, 8, f);
  if (got < 8 || std::memcmp(lead, magic, magic_size) != 0)
    return bad(path, "not a NumPy .npy file (bad magic)");
  int major = lead[6];
  uint32_t length = 0;
  if (major == 1) {
    if (std::fread(lead + 8, 1, 2, f) != 2)
      return bad(path, "truncated: the header's length is cut");
    length = uint32_t{lead[8]} | (uint32_t{lead[9]} << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len4[4];
    if (std::fread(len4, 1, 4, f) != 4)
      return bad(path, "truncated: the header's length is cut");
    length = uint32_t{len4[0]} | (uint32_t{len4[1]} << 8)
             | (uint32_t{len4[2]} << 16) | (uint32_t{len4[3]} << 24);
  } else {
    return bad(path, ".npy format version " + std::to_string(major) + "."
                       + std::to_string(lead[7])
                       + " (versions 1 to 3 are read)");
  }
  if (length > max_header)
    return bad(path, "a header of " + std::to_string(length)
                       + " bytes (at most " + std::to_string(max_header) + ")");
  std::string text(length, '\0');
  if (std::fread(text.data(), 1, length, f) != length)
    return bad(path, "truncated: the header needs " + std::to_string(length)
                       + " bytes");
  std::string descr;
  bool fortran = false, has_descr = false, has_fortran = false,
       has_shape = false;
  npy_header h;
  if (auto err = dict_parser{text}.parse(descr, fortran, h.shape, has_descr,
                                         has_fortran, has_shape))
    return bad(path, *err);
  if (!has_descr || !has_fortran || !has_shape)
    return bad(path, std::string{"the header lacks '"}
                       + (!has_descr ? "descr" : !has_fortran ? "fortran_order"
                                                              : "shape")
                       + "'");
  if (fortran)
    return bad(path, "the array is in Fortran order; save it with "
                     "numpy.ascontiguousarray(a) first");
  if (!descr.empty() && descr[0] == '>')
    return bad(path, "big-endian data ('" + descr + "'); save it with "
                     "a.astype(a.dtype.newbyteorder('<')) first");
  auto e = element_of(descr);
  if (!e)
    return bad(path, "dtype '" + descr + "' is not read (features: float32, "
                     "float64 or uint8; labels: an integer type)");
  h.type = e->first;
  h.item_size = e->second;
  return h;
}

/// Reads exactly `n` bytes of data, the rest of the file. The file's size
/// is checked first, so a shape in a header never makes the reader
/// allocate more than the file holds.
caf::error read_data(std::FILE* f, const std::string& path,
                     std::vector<unsigned char>& dst, size_t n) {
  struct stat st;
  auto at = std::ftell(f);
  if (at < 0 || fstat(fileno(f), &st) != 0)
    return make_error(errc::io_error, path + ": read error");
  auto left = static_cast<uint64_t>(st.st_size) - static_cast<uint64_t>(at);
  if (left < n)
    return bad(path, "truncated: the data needs " + std::to_string(n)
                       + " bytes, the file has " + std::to_string(left));
  if (left > n)
    return bad(path, "more data than its shape announces");
  dst.resize(n);
  if (std::fread(dst.data(), 1, n, f) != n)
    return make_error(errc::io_error, path + ": read error");
  return caf::none;
}

caf::expected<std::pair<file_ptr, npy_header>>
open_npy(const std::string& path) {
  if (auto err = check_regular(path))
    return err;
  file_ptr f{std::fopen(path.c_str(), "rb")};
  if (!f)
    return open_error(path);
  auto h = read_header(f.get(), path);
  if (!h)
    return h.error();
  return std::make_pair(std::move(f), std::move(*h));
}

template <class T>
T little_endian_at(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v); // x86-64 and AArch64 are little endian
  return v;
}

/// One label, widened; nothing for a type that is not an integer.
std::optional<int64_t> label_at(element e, const unsigned char* p,
                                bool& too_large) {
  too_large = false;
  switch (e) {
    case element::u1: return int64_t{p[0]};
    case element::i1: return int64_t{static_cast<int8_t>(p[0])};
    case element::i2: return int64_t{little_endian_at<int16_t>(p)};
    case element::u2: return int64_t{little_endian_at<uint16_t>(p)};
    case element::i4: return int64_t{little_endian_at<int32_t>(p)};
    case element::u4: return int64_t{little_endian_at<uint32_t>(p)};
    case element::i8: return little_endian_at<int64_t>(p);
    case element::u8: {
      auto v = little_endian_at<uint64_t>(p);
      too_large = v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      return static_cast<int64_t>(too_large ? 0 : v);
    }
    default: return std::nullopt;
  }
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

} // namespace

caf::expected<dataset> load_npy(const std::string& features_path,
                                const std::string& labels_path) {
  dataset out;
  out.source = features_path;
  {
    auto opened = open_npy(features_path);
    if (!opened)
      return opened.error();
    auto& [f, h] = *opened;
    const auto& s = h.shape;
    if (s.size() < 2 || s.size() > 4)
      return bad(features_path, "features of shape " + shape_text(s)
                                  + " (expected (N, F), (N, H, W) or "
                                    "(N, H, W, C))");
    if (h.type != element::f4 && h.type != element::f8
        && h.type != element::u1)
      return bad(features_path, "features must be float32, float64 or "
                                "uint8");
    uint64_t per_sample = 1;
    for (size_t i = 1; i < s.size(); ++i)
      per_sample *= s[i];
    if (s[0] == 0 || per_sample == 0)
      return bad(features_path, "no samples (shape " + shape_text(s) + ")");
    if (s[0] * per_sample > max_dataset_values)
      return bad(features_path, "shape " + shape_text(s) + " holds more than "
                                  + std::to_string(max_dataset_values)
                                  + " values");
    auto dims = [&](size_t i) { return static_cast<int>(s[i]); };
    if (per_sample > static_cast<uint64_t>(std::numeric_limits<int>::max()))
      return bad(features_path, "samples too large");
    out.count = static_cast<int64_t>(s[0]);
    out.height = s.size() == 2 ? 1 : dims(1);
    out.width = s.size() == 2 ? dims(1) : dims(2);
    out.channels = s.size() == 4 ? dims(3) : 1;
    auto n = static_cast<size_t>(s[0] * per_sample);
    std::vector<unsigned char> raw;
    if (auto err = read_data(f.get(), features_path, raw, n * h.item_size))
      return err;
    out.images.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const unsigned char* p = raw.data() + i * h.item_size;
      float v = h.type == element::u1 ? static_cast<float>(p[0]) / 255.f
                : h.type == element::f4
                  ? little_endian_at<float>(p)
                  : static_cast<float>(little_endian_at<double>(p));
      if (!std::isfinite(v))
        return bad(features_path,
                   "value " + std::to_string(i % per_sample) + " of sample "
                     + std::to_string(i / per_sample)
                     + " is not finite (or too large for float32)");
      out.images[i] = v;
    }
  }
  auto opened = open_npy(labels_path);
  if (!opened)
    return opened.error();
  auto& [f, h] = *opened;
  if (h.shape.size() != 1)
    return bad(labels_path, "labels of shape " + shape_text(h.shape)
                              + " (expected (N,))");
  if (h.type == element::f4 || h.type == element::f8)
    return bad(labels_path, "labels must be integers, not floats");
  if (h.shape[0] != static_cast<uint64_t>(out.count))
    return bad(labels_path, std::to_string(h.shape[0]) + " labels for "
                              + std::to_string(out.count) + " samples in "
                              + features_path);
  std::vector<unsigned char> raw;
  if (auto err = read_data(f.get(), labels_path, raw,
                           static_cast<size_t>(out.count) * h.item_size))
    return err;
  out.labels.resize(static_cast<size_t>(out.count));
  int64_t largest = 0;
  for (size_t i = 0; i < out.labels.size(); ++i) {
    bool too_large = false;
    auto v = label_at(h.type, raw.data() + i * h.item_size, too_large);
    if (too_large || *v < 0 || *v >= max_classes)
      return bad(labels_path,
                 "label of sample " + std::to_string(i) + " is "
                   + (too_large ? std::string{"above 2^63"}
                                : std::to_string(*v))
                   + " (labels are 0.." + std::to_string(max_classes - 1)
                   + ")");
    out.labels[i] = static_cast<int32_t>(*v);
    largest = std::max(largest, *v);
  }
  out.classes = static_cast<int>(largest) + 1;
  return out;
}

} // namespace troupe
