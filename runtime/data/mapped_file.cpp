#include "runtime/data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_checks.hpp"

namespace troupe {

mapped_file::~mapped_file() {
  if (size_ > 0)
    ::munmap(const_cast<unsigned char*>(data_), size_);
}

void mapped_file::done_with(const unsigned char* first, size_t n) const {
  // Whole pages inside the range only: a page shared with bytes still in
  // use stays.
  auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto from = (reinterpret_cast<uintptr_t>(first) + page - 1) / page * page;
  auto to = (reinterpret_cast<uintptr_t>(first) + n) / page * page;
  if (to > from)
    ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

caf::expected<std::shared_ptr<const mapped_file>>
map_file(const std::string& path, uint64_t max_bytes) {
  if (auto err = check_regular(path))
    return err;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return open_error(path);
  auto stamp = file_stamp::of(fd, path);
  if (!stamp) {
    ::close(fd);
    return stamp.error();
  }
  auto size = static_cast<uint64_t>(stamp->bytes);
  if (size > max_bytes) {
    ::close(fd);
    return make_error(errc::bad_format,
                      path + ": a file of " + std::to_string(size)
                        + " bytes (at most " + std::to_string(max_bytes) + ")");
  }
  if (size == 0) {
    ::close(fd);
    return std::make_shared<const mapped_file>(nullptr, 0, std::move(*stamp));
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE,
                   fd, 0);
  ::close(fd); // the mapping keeps the file
  if (p == MAP_FAILED)
    return make_error(errc::io_error, path + ": cannot map it for reading");
  return std::make_shared<const mapped_file>(static_cast<unsigned char*>(p),
                                             static_cast<size_t>(size),
                                             std::move(*stamp));
}

} // namespace troupe
