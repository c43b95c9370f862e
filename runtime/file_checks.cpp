#include "runtime/file_checks.hpp"

#include <sys/stat.h>

#include "runtime/errc.hpp"

namespace troupe {

caf::error open_error(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return make_error(errc::file_not_found, path + ": no such file");
  return make_error(errc::io_error, path + ": cannot open for reading");
}

caf::error check_regular(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return make_error(errc::file_not_found, path + ": no such file");
  if (!S_ISREG(st.st_mode))
    return make_error(errc::bad_format, path + ": not a regular file");
  return caf::none;
}

} // namespace troupe
