// What the readers of reader_inputs.cpp and reader_inputs_files.cpp
// share: the folder each input's files are written to, and what a
// checkpoint read back must satisfy. Private to tests/fuzz/reader_inputs*.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/checkpoint/checkpoint.hpp"

namespace troupe::fuzz {

/// One folder per process, made on first use and emptied and removed at
/// exit. On tmpfs (/dev/shm) when there is one: every input writes files,
/// and a disk would make that the fuzzer's bottleneck. A process that
/// crashes leaves its folder behind (troupe-fuzz-XXXXXX).
class scratch {
public:
  static scratch& get() {
    static scratch s;
    return s;
  }

  /// The path of `name` in the folder; the name is removed at exit.
  std::string file(const std::string& name) {
    if (std::find(names_.begin(), names_.end(), name) == names_.end())
      names_.push_back(name);
    return dir_ + "/" + name;
  }

  /// An empty folder for inflated copies (runtime/data/inflated_cache.hpp),
  /// emptied at each call: an input's copy is never another input's, whose
  /// file may have the same size and modification time.
  std::string empty_cache() {
    auto dir = dir_ + "/cache";
    if (DIR* d = ::opendir(dir.c_str())) {
      while (auto* e = ::readdir(d))
        if (e->d_name[0] != '.')
          ::unlink((dir + "/" + e->d_name).c_str());
      ::closedir(d);
    }
    return dir;
  }

  ~scratch() {
    for (auto& n : names_)
      ::unlink((dir_ + "/" + n).c_str());
    empty_cache();
    ::rmdir((dir_ + "/cache").c_str());
    ::rmdir(dir_.c_str());
  }

private:
  scratch() {
    struct stat st;
    const char* env = std::getenv("TMPDIR");
    std::string base = env != nullptr && *env != '\0' ? env
                       : ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)
                         ? "/dev/shm"
                         : "/tmp";
    std::string tmpl = base + "/troupe-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("troupe fuzz: mkdtemp");
      std::abort(); // no folder, nothing to read
    }
    dir_ = tmpl;
  }

  std::string dir_;
  std::vector<std::string> names_;
};

/// Writes `n` bytes to `path`, through zlib's gzip writer when `gz`.
inline void write_file(const std::string& path, const uint8_t* data, size_t n,
                       bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr)
      std::abort();
    if (n > 0)
      gzwrite(f, data, static_cast<unsigned>(n));
    gzclose(f);
    return;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    std::abort();
  while (n > 0) {
    auto w = ::write(fd, data, n);
    if (w <= 0)
      std::abort(); // tmpfs full: the run says nothing about the readers
    data += w;
    n -= static_cast<size_t>(w);
  }
  ::close(fd);
}

inline std::string checkpoint_broken(const checkpoint& c) {
  const size_t total = c.layout.total();
  if (c.step < 0 || c.layout.tensors().empty() || c.params.size() != total)
    return "a step below 0, no tensors, or params.size() != layout.total()";
  for (auto x : c.params)
    if (!std::isfinite(x))
      return "a parameter that is NaN or infinite";
  for (size_t i = 0; i < c.slots.size(); ++i) {
    auto& [name, values] = c.slots[i];
    if (name == "params" || values.size() != total)
      return "an optimizer slot named params or of the wrong size";
    for (size_t j = 0; j < i; ++j)
      if (c.slots[j].first == name)
        return "two optimizer slots of one name";
    for (auto x : values)
      if (!std::isfinite(x))
        return "an optimizer value that is NaN or infinite";
  }
  if (check_layout(c, c.layout, "self"))
    return "a layout that differs from itself";
  return {};
}

inline bool same_floats(const std::vector<float>& a,
                        const std::vector<float>& b) {
  return a.size() == b.size()
         && (a.empty()
             || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline bool same_checkpoint(const checkpoint& a, const checkpoint& b) {
  if (a.step != b.step || a.metadata != b.metadata || a.layout.compare(b.layout)
      || !same_floats(a.params, b.params) || a.slots.size() != b.slots.size())
    return false;
  for (size_t i = 0; i < a.slots.size(); ++i)
    if (a.slots[i].first != b.slots[i].first
        || !same_floats(a.slots[i].second, b.slots[i].second))
      return false;
  return true;
}

} // namespace troupe::fuzz
