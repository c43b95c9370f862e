// Helpers shared by the test folders: temporary directories and files, and
// edits of a config's text.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include <boost/test/unit_test.hpp>

#include "caf/expected.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
/// destruction.
class temp_dir {
public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string{base != nullptr ? base : "/tmp"}
                       + "/troupe-test-XXXXXX";
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~temp_dir() {
    if (!path_.empty())
      std::system(("rm -rf '" + path_ + "'").c_str());
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// The names in folder `dir` that do not start with '.', sorted; empty
/// when it cannot be read.
inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.')
        out.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The error text of `x`, or "" when it holds a value. Safe inside
/// BOOST_*_MESSAGE, which builds its message even when the check passes.
template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string{} : describe(x.error());
}

/// The Python that has NumPy (and PyTorch) where they are installed
/// (tests/CMakeLists.txt: Debian's /usr/bin/python3 by default).
inline std::string python() {
#ifdef TROUPE_PYTHON
  return TROUPE_PYTHON;
#else
  return "python3";
#endif
}

/// Whether python() imports `module`. Under CI, where .ci/run installs
/// every package the tests use, a missing module is a failure, not a skip.
inline bool python_has(const std::string& module) {
  auto cmd = python() + " -c 'import " + module + "' >/dev/null 2>&1";
  bool has = std::system(cmd.c_str()) == 0;
  if (!has && std::getenv("CI") != nullptr)
    throw std::runtime_error(python() + " cannot import " + module
                             + ", which CI installs");
  return has;
}

/// `text` with its first `from` replaced by `to`: one edit of a config's
/// text. Fails the test when `text` has no `from` (the edit would silently
/// test the unedited config).
inline std::string replace_first(std::string text, const std::string& from,
                                 const std::string& to) {
  auto at = text.find(from);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "no \"" << from << "\" in:\n"
                                                         << text);
  return text.replace(at, from.size(), to);
}

/// Writes `text` to `path`.
inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
}

/// Writes `text` to `path` gzipped, at zlib's `level` (1 fastest, 9
/// smallest), as gzip(1) would.
inline void write_gz(const std::string& path, const std::string& text,
                     int level = 6) {
  gzFile f = gzopen(path.c_str(), ("wb" + std::to_string(level)).c_str());
  if (f == nullptr
      || gzwrite(f, text.data(), static_cast<unsigned>(text.size()))
           != static_cast<int>(text.size())
      || gzclose(f) != Z_OK)
    throw std::runtime_error("cannot write " + path);
}

/// One tensor of a safetensors file a test writes as a user would.
struct user_tensor {
  std::string name;
  std::string shape; ///< JSON, e.g. "[4]" or "[]"
  std::vector<float> values;
  std::string dtype = "F32";
  /// Written instead of `values` when not empty (another dtype's bytes).
  std::string raw = {};
};

/// Writes `tensors` to `path` as a safetensors file with no troupe
/// metadata, in the order given (PyTorch's save_file writes such files).
/// `metadata`: the __metadata__ object's JSON, e.g. the buffers a file
/// names (python/troupe's write_parameters writes it).
inline void write_user_safetensors(const std::string& path,
                                   const std::vector<user_tensor>& tensors,
                                   const std::string& metadata = "") {
  std::string header = "{";
  if (!metadata.empty())
    header += "\"__metadata__\":" + metadata;
  size_t at = 0;
  std::string data;
  for (auto& t : tensors) {
    auto bytes = t.raw.empty() ? t.values.size() * sizeof(float) : t.raw.size();
    if (header.size() > 1)
      header += ",";
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype
              + "\",\"shape\":" + t.shape + ",\"data_offsets\":["
              + std::to_string(at) + "," + std::to_string(at + bytes) + "]}";
    if (t.raw.empty())
      data.append(reinterpret_cast<const char*>(t.values.data()), bytes);
    else
      data += t.raw;
    at += bytes;
  }
  header += "}";
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i)
    len[static_cast<size_t>(i)] = static_cast<char>(
      (static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  write_file(path, len + header + data);
}

/// The header of an .npy array of dtype `descr` ("<f4", "|u1") and
/// `shape` (a Python tuple, "(100, 4)"), as np.save writes it: padded with
/// spaces to a multiple of 64 bytes and ended by a newline; version 1
/// (a 2-byte length) or 2 and 3 (4 bytes).
inline std::string npy_header(const std::string& descr,
                              const std::string& shape, bool fortran = false,
                              int major = 1) {
  std::string dict = "{'descr': '" + descr
                     + "', 'fortran_order': " + (fortran ? "True" : "False")
                     + ", 'shape': " + shape + ", }";
  size_t lead = major == 1 ? 10 : 12;
  size_t total = (lead + dict.size() + 1 + 63) / 64 * 64;
  dict += std::string(total - lead - dict.size() - 1, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  auto n = dict.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1)
    out += std::string(2, '\0');
  return out + dict;
}

/// Writes float32 `values` of shape `shape` (e.g. "(100, 4)") as an .npy
/// file, as np.save writes it.
inline void write_npy_f32(const std::string& path, const std::string& shape,
                          const std::vector<float>& values) {
  write_file(path, npy_header("<f4", shape)
                     + std::string(reinterpret_cast<const char*>(values.data()),
                                   values.size() * sizeof(float)));
}

} // namespace troupe::test
