// NumPy's .npy format (numpy.lib.format): the magic "\x93NUMPY", a version
// byte pair, the header's length (2 bytes little endian in version 1, 4 in
// versions 2 and 3), then the header, a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }, and
// the array's bytes in C order. Only what np.save writes for plain numeric
// arrays is accepted; anything else (object or structured dtypes, Fortran
// order, big-endian data) is refused with the reason, never guessed at.
#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_checks.hpp"
#include "runtime/data/npy_array.hpp"

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

/// Parses the header of the .npy bytes `b` (a file, or a member of an
/// .npz archive, named `path` in errors); `at` ends on the data's first
/// byte.
caf::expected<npy_header> read_header(std::string_view b,
                                      const std::string& path, size_t& at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(b[i]); };
  if (b.size() < 8 || b.compare(0, magic_size, magic) != 0)
    return bad(path, "not a NumPy .npy file (bad magic)");
  int major = byte(6);
  uint32_t length = 0;
  if (major == 1) {
    if (b.size() < 10)
      return bad(path, "truncated: the header's length is cut");
    length = uint32_t{byte(8)} | (uint32_t{byte(9)} << 8);
    at = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12)
      return bad(path, "truncated: the header's length is cut");
    length = uint32_t{byte(8)} | (uint32_t{byte(9)} << 8)
             | (uint32_t{byte(10)} << 16) | (uint32_t{byte(11)} << 24);
    at = 12;
  } else {
    return bad(path, ".npy format version " + std::to_string(major) + "."
                       + std::to_string(byte(7))
                       + " (versions 1 to 3 are read)");
  }
  if (length > max_header)
    return bad(path, "a header of " + std::to_string(length)
                       + " bytes (at most " + std::to_string(max_header) + ")");
  if (b.size() - at < length)
    return bad(path, "truncated: the header needs " + std::to_string(length)
                       + " bytes");
  std::string text{b.substr(at, length)};
  at += length;
  std::string descr;
  bool fortran = false, has_descr = false, has_fortran = false,
       has_shape = false;
  npy_header h;
  if (auto err = dict_parser{text}.parse(descr, fortran, h.shape, has_descr,
                                         has_fortran, has_shape))
    return bad(path, *err);
  if (!has_descr || !has_fortran || !has_shape)
    return bad(path, std::string{"the header lacks '"}
                       + (!has_descr     ? "descr"
                          : !has_fortran ? "fortran_order"
                                         : "shape")
                       + "'");
  if (fortran)
    return bad(path, "the array is in Fortran order; save it with "
                     "numpy.ascontiguousarray(a) first");
  if (!descr.empty() && descr[0] == '>')
    return bad(path, "big-endian data ('" + descr
                       + "'); save it with "
                         "a.astype(a.dtype.newbyteorder('<')) first");
  auto e = element_of(descr);
  if (!e)
    return bad(path, "dtype '" + descr
                       + "' is not read (features: float32, "
                         "float64 or uint8; labels: an integer type)");
  h.type = e->first;
  h.item_size = e->second;
  return h;
}

/// The `n` bytes of data after `at`, which must end the bytes.
caf::expected<const unsigned char*> data_of(std::string_view b, size_t at,
                                            const std::string& path, size_t n) {
  auto left = b.size() - at;
  if (left < n)
    return bad(path, "truncated: the data needs " + std::to_string(n)
                       + " bytes, the file has " + std::to_string(left));
  if (left > n)
    return bad(path, "more data than its shape announces");
  return reinterpret_cast<const unsigned char*>(b.data() + at);
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
      too_large = v
                  > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
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

namespace {

/// The features of a dataset from the bytes of an .npy array: count,
/// shape, and the values where they lie (float values checked finite
/// once, here; bytes need no check).
caf::error fill_features(dataset& out, const npy_bytes& features,
                         const std::string& features_name, bool read_features) {
  size_t at = 0;
  auto h = read_header(features.bytes, features_name, at);
  if (!h)
    return h.error();
  const auto& s = h->shape;
  if (s.size() < 2 || s.size() > 4)
    return bad(features_name, "features of shape " + shape_text(s)
                                + " (expected (N, F), (N, H, W) or "
                                  "(N, H, W, C))");
  if (h->type != element::f4 && h->type != element::f8
      && h->type != element::u1)
    return bad(features_name, "features must be float32, float64 or "
                              "uint8");
  uint64_t per_sample = 1;
  for (size_t i = 1; i < s.size(); ++i)
    per_sample *= s[i];
  if (s[0] == 0 || per_sample == 0)
    return bad(features_name, "no samples (shape " + shape_text(s) + ")");
  if (s[0] * per_sample > max_dataset_values)
    return bad(features_name, "shape " + shape_text(s) + " holds more than "
                                + std::to_string(max_dataset_values)
                                + " values");
  auto dims = [&](size_t i) { return static_cast<int>(s[i]); };
  out.count = static_cast<int64_t>(s[0]);
  out.height = s.size() == 2 ? 1 : dims(1);
  out.width = s.size() == 2 ? dims(1) : dims(2);
  out.channels = s.size() == 4 ? dims(3) : 1;
  auto n = static_cast<size_t>(s[0] * per_sample);
  auto raw = data_of(features.bytes, at, features_name, n * h->item_size);
  if (!raw)
    return raw.error();
  if (!read_features)
    return caf::none;
  auto type = h->type == element::u1   ? feature_store::type::u8
              : h->type == element::f4 ? feature_store::type::f32
                                       : feature_store::type::f64;
  if (type != feature_store::type::u8) {
    // In slices, each let go of behind the check where the file is mapped.
    constexpr size_t slice = size_t{1} << 20; // values
    for (size_t first = 0; first < n; first += slice) {
      auto last = std::min(n, first + slice);
      for (size_t i = first; i < last; ++i) {
        const unsigned char* p = *raw + i * h->item_size;
        float v = type == feature_store::type::f32
                    ? little_endian_at<float>(p)
                    : static_cast<float>(little_endian_at<double>(p));
        if (!std::isfinite(v))
          return bad(features_name,
                     "value " + std::to_string(i % per_sample) + " of sample "
                       + std::to_string(i / per_sample)
                       + " is not finite (or too large for float32)");
      }
      if (features.mapped)
        features.mapped->done_with(*raw + first * h->item_size,
                                   (last - first) * h->item_size);
    }
  }
  out.features = feature_store{type, *raw, out.count,
                               static_cast<size_t>(per_sample), features.owner};
  return caf::none;
}

/// Float targets from the labels array `h` of `b` (its data at `at`):
/// (N,) or (N, K) of any integer or float type, each finite (and in [0, 1]
/// for probabilities), into out.targets; out.classes becomes K.
caf::error fill_targets(dataset& out, const npy_header& h, std::string_view b,
                        size_t at, const std::string& name,
                        target_kind targets) {
  const auto& s = h.shape;
  if (s.empty() || s.size() > 2)
    return bad(name, "targets of shape " + shape_text(s)
                       + " (expected (N,) or (N, K))");
  if (s[0] != static_cast<uint64_t>(out.count))
    return bad(name, std::to_string(s[0]) + " targets for "
                       + std::to_string(out.count) + " samples in "
                       + out.source);
  uint64_t width = s.size() == 2 ? s[1] : 1;
  if (width == 0 || width > static_cast<uint64_t>(max_classes))
    return bad(name, "shape " + shape_text(s) + ": 1 to "
                       + std::to_string(max_classes) + " targets per sample");
  if (s[0] * width > max_dataset_values)
    return bad(name, "shape " + shape_text(s) + " holds more than "
                       + std::to_string(max_dataset_values) + " values");
  auto n = static_cast<size_t>(s[0] * width);
  auto raw = data_of(b, at, name, n * h.item_size);
  if (!raw)
    return raw.error();
  out.targets.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char* p = *raw + i * h.item_size;
    double v = 0;
    if (h.type == element::f4)
      v = little_endian_at<float>(p);
    else if (h.type == element::f8)
      v = little_endian_at<double>(p);
    else if (h.type == element::u8)
      v = static_cast<double>(little_endian_at<uint64_t>(p));
    else {
      bool unused = false;
      v = static_cast<double>(*label_at(h.type, p, unused));
    }
    auto where = [&] {
      return "target " + std::to_string(i % width) + " of sample "
             + std::to_string(i / width);
    };
    auto f = static_cast<float>(v);
    if (!std::isfinite(f))
      return bad(name, where()
                         + " is not finite (or too large for "
                           "float32)");
    if (targets == target_kind::probabilities && !(f >= 0.f && f <= 1.f))
      return bad(name, where() + " is " + std::to_string(v)
                         + "; binary cross-entropy needs targets in [0, 1]");
    out.targets[i] = f;
  }
  out.classes = static_cast<int>(width);
  return caf::none;
}
} // namespace

caf::expected<dataset>
dataset_from_npy(const npy_bytes& features, const std::string& features_name,
                 const npy_bytes& labels_array, const std::string& labels_name,
                 target_kind targets, bool read_features) {
  dataset out;
  out.source = features_name;
  if (auto err = fill_features(out, features, features_name, read_features))
    return err;
  auto labels = labels_array.bytes;
  size_t at = 0;
  auto h = read_header(labels, labels_name, at);
  if (!h)
    return h.error();
  if (targets != target_kind::classes) {
    if (auto err = fill_targets(out, *h, labels, at, labels_name, targets))
      return err;
    return out;
  }
  if (h->shape.size() != 1)
    return bad(labels_name,
               "labels of shape " + shape_text(h->shape) + " (expected (N,))");
  if (h->type == element::f4 || h->type == element::f8)
    return bad(labels_name, "labels must be integers, not floats");
  if (h->shape[0] != static_cast<uint64_t>(out.count))
    return bad(labels_name, std::to_string(h->shape[0]) + " labels for "
                              + std::to_string(out.count) + " samples in "
                              + features_name);
  auto raw = data_of(labels, at, labels_name,
                     static_cast<size_t>(out.count) * h->item_size);
  if (!raw)
    return raw.error();
  out.labels.resize(static_cast<size_t>(out.count));
  int64_t largest = 0;
  for (size_t i = 0; i < out.labels.size(); ++i) {
    bool too_large = false;
    auto v = label_at(h->type, *raw + i * h->item_size, too_large);
    if (too_large || *v < 0 || *v >= max_classes)
      return bad(labels_name, "label of sample " + std::to_string(i) + " is "
                                + (too_large ? std::string{"above 2^63"}
                                             : std::to_string(*v))
                                + " (labels are 0.."
                                + std::to_string(max_classes - 1) + ")");
    out.labels[i] = static_cast<int32_t>(*v);
    largest = std::max(largest, *v);
  }
  out.classes = static_cast<int>(largest) + 1;
  return out;
}

namespace {

/// A .npy file, mapped.
caf::expected<npy_bytes> map_npy(const std::string& path) {
  auto file = map_file(path, max_npy_bytes);
  if (!file)
    return file.error();
  npy_bytes out;
  out.bytes = (*file)->bytes();
  out.mapped = file->get();
  out.owner = std::move(*file);
  return out;
}

} // namespace

caf::expected<dataset> load_npy_features(const std::string& path) {
  auto bytes = map_npy(path);
  if (!bytes)
    return bytes.error();
  dataset out;
  out.source = path;
  if (auto err = fill_features(out, *bytes, path, true))
    return err;
  return out;
}

caf::expected<dataset> load_npy(const std::string& features_path,
                                const std::string& labels_path,
                                target_kind targets, bool read_features) {
  auto features = map_npy(features_path);
  if (!features)
    return features.error();
  auto labels = map_npy(labels_path);
  if (!labels)
    return labels.error();
  auto out = dataset_from_npy(*features, features_path, *labels, labels_path,
                              targets, read_features);
  if (out && !out->features.empty())
    out->mapped.push_back(
      {0, out->count,
       std::static_pointer_cast<const mapped_file>(features->owner)});
  if (out)
    out->files.push_back({features_path, 0, out->count});
  return out;
}

} // namespace troupe
