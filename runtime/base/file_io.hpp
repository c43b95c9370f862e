// What the writers and readers of checkpoint files share: an owned file
// descriptor, a write that finishes or fails, and errors that name the
// file. Inline, for runtime/checkpoint/checkpoint.cpp and
// runtime/sparse/table_file.cpp.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <unistd.h>

#include "runtime/base/errc.hpp"
#include "runtime/base/json_text.hpp"

namespace troupe::file_io {

inline caf::error io_error(const std::string& path, const std::string& what) {
  return make_error(errc::io_error,
                    path + ": " + what + ": " + std::strerror(errno));
}

/// `what` may quote names and values of the file (a tensor's key, the
/// step): escaped, so the error stays one line.
inline caf::error format_error(const std::string& path,
                               const std::string& what) {
  return make_error(errc::bad_format, path + ": " + printable(what));
}

class fd_guard {
public:
  explicit fd_guard(int fd) : fd_(fd) {}
  ~fd_guard() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

private:
  int fd_;
};

inline bool write_all(int fd, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

/// Reads n bytes at offset `at`; false on an error or a short file.
inline bool pread_all(int fd, void* dst, uint64_t n, uint64_t at) {
  auto* d = static_cast<char*>(dst);
  uint64_t got = 0;
  while (got < n) {
    auto r = ::pread(fd, d + got, n - got, static_cast<off_t>(at + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    got += static_cast<uint64_t>(r);
  }
  return true;
}

inline std::string parent_dir(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos)
    return ".";
  return pos == 0 ? "/" : path.substr(0, pos);
}

} // namespace troupe::file_io
