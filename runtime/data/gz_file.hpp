// A file read through zlib's gz* functions, which read gzipped and plain
// files alike: the IDX and CIFAR-10 readers and the click-log lines share
// it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <zlib.h>

namespace troupe {

class gz_file {
public:
  explicit gz_file(const std::string& path)
    : file_(gzopen(path.c_str(), "rb")) {}
  ~gz_file() {
    if (file_ != nullptr)
      gzclose(file_);
  }
  gz_file(const gz_file&) = delete;
  gz_file& operator=(const gz_file&) = delete;

  bool is_open() const { return file_ != nullptr; }

  /// Bytes of the file read so far (compressed ones for a gzip file).
  int64_t file_offset() const { return static_cast<int64_t>(gzoffset(file_)); }

  /// Whether a gzip stream stopped before its end: gzread hands out what
  /// it decompressed and only gzerror says Z_BUF_ERROR. When only the
  /// 8-byte trailer is cut, every byte arrives and the CRC-32 is never
  /// checked, so a read that ended must ask.
  bool ended_early() {
    int code = Z_OK;
    gzerror(file_, &code);
    return code == Z_BUF_ERROR;
  }

  /// Reads up to n bytes; returns the count read, or -1 on a zlib error
  /// (a corrupt or truncated gzip stream).
  int64_t read(void* dst, size_t n) {
    size_t total = 0;
    auto* out = static_cast<unsigned char*>(dst);
    while (total < n) {
      auto chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
      int got = gzread(file_, out + total, chunk);
      if (got < 0)
        return -1;
      if (got == 0)
        break;
      total += static_cast<size_t>(got);
    }
    return static_cast<int64_t>(total);
  }

private:
  gzFile file_;
};

} // namespace troupe
