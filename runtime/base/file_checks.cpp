#include "runtime/base/file_checks.hpp"

#include <fstream>
#include <sys/stat.h>

#include "runtime/base/errc.hpp"

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

caf::expected<std::string> read_whole_file(const std::string& path,
                                           uint64_t max_bytes) {
  if (auto err = check_regular(path))
    return err;
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return open_error(path);
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return open_error(path);
  auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    return make_error(errc::bad_format,
                      path + ": a file of " + std::to_string(size)
                        + " bytes (at most " + std::to_string(max_bytes) + ")");
  std::string out(static_cast<size_t>(size), '\0');
  in.read(out.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size)
    return make_error(errc::io_error, path + ": read error");
  return out;
}

} // namespace troupe
