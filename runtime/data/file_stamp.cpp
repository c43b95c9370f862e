#include "runtime/data/file_stamp.hpp"

#include <sys/stat.h>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_checks.hpp"

namespace troupe {

namespace {

file_stamp stamp_of(const struct stat& st, const std::string& path) {
  file_stamp s;
  s.path = path;
  s.bytes = static_cast<int64_t>(st.st_size);
  s.modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000
                  + st.st_mtim.tv_nsec;
  return s;
}

} // namespace

caf::expected<file_stamp> file_stamp::of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return open_error(path);
  return stamp_of(st, path);
}

caf::expected<file_stamp> file_stamp::of(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return make_error(errc::io_error, path + ": cannot read its size");
  return stamp_of(st, path);
}

caf::error file_stamp::check() const {
  auto now = of(path);
  if (!now)
    return make_error(errc::data_changed,
                      path + ": this dataset file went missing during the run");
  if (now->bytes != bytes)
    return make_error(errc::data_changed,
                      path + ": this dataset file changed during the run ("
                        + std::to_string(bytes) + " bytes when opened, "
                        + std::to_string(now->bytes) + " now)");
  if (now->modified_ns != modified_ns)
    return make_error(errc::data_changed,
                      path
                        + ": this dataset file changed during the run "
                          "(modified since it was opened)");
  return caf::none;
}

} // namespace troupe
