// Helpers shared by the test folders: temporary directories and files.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

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

/// The error text of `x`, or "" when it holds a value. Safe inside
/// BOOST_*_MESSAGE, which builds its message even when the check passes.
template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string{} : describe(x.error());
}

/// Writes `text` to `path`.
inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
}

} // namespace troupe::test
