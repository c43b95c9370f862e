#include "runtime/data/inflated_cache.hpp"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_io.hpp"
#include "runtime/data/file_stamp.hpp"

namespace troupe {

namespace {

uint64_t fnv1a(const std::string& text, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// A name's letters, digits, '-', '_' and '.'; anything else becomes '_'.
std::string file_safe(const std::string& name) {
  std::string out = name;
  for (auto& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'
          || c == '.'))
      c = '_';
  return out;
}

caf::error folder_error(const std::string& dir, const std::string& what) {
  return make_error(errc::io_error,
                    "data.cache_dir: " + dir + ": " + what + ": "
                      + std::strerror(errno)
                      + " (set data.cache_dir to a writable folder, or "
                        "data.read to \"memory\")");
}

/// mkdir -p, new folders private to the user: they hold the data.
caf::error make_folder(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/')
      continue;
    auto prefix = dir.substr(0, at);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return folder_error(dir, "cannot make the folder " + prefix);
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return folder_error(dir, "not a folder");
  }
  return caf::none;
}

class file_sink : public inflated_sink {
public:
  file_sink(int fd, std::string path, uint64_t max_bytes, std::string source)
    : fd_(fd), path_(std::move(path)), max_bytes_(max_bytes),
      source_(std::move(source)) {}

  caf::error append(const void* data, size_t n) override {
    if (written_ + n > max_bytes_)
      return make_error(errc::bad_format, source_ + ": inflates to more than "
                                            + std::to_string(max_bytes_)
                                            + " bytes");
    if (!file_io::write_all(fd_, data, n))
      return make_error(errc::io_error,
                        "data.cache_dir: " + path_
                          + ": write failed: " + std::strerror(errno));
    written_ += n;
    return caf::none;
  }

private:
  int fd_;
  std::string path_;
  uint64_t max_bytes_;
  std::string source_;
  uint64_t written_ = 0;
};

/// Removes the copies of the same source and member made from earlier
/// versions of it (`prefix` is their name up to the version's hash).
void remove_older_copies(const std::string& dir, const std::string& prefix,
                         const std::string& keep) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return;
  while (auto* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != keep && name.compare(0, prefix.size(), prefix) == 0
        && name.find(".tmp.") == std::string::npos)
      ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

} // namespace

std::string default_data_cache_dir() {
  // The first that is a folder or can be made: a read-only home (a
  // container's, a batch job's) falls through to /tmp.
  std::vector<std::string> candidates;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME");
      xdg != nullptr && xdg[0] == '/')
    candidates.push_back(std::string{xdg} + "/troupe");
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/')
    candidates.push_back(std::string{home} + "/.cache/troupe");
  candidates.push_back("/tmp/troupe-cache-" + std::to_string(::getuid()));
  // Ours, and no link: /tmp is shared, and a folder there that another
  // user made first must not receive our data.
  auto usable = [](const std::string& dir) {
    struct stat st {};
    return !make_folder(dir) && ::lstat(dir.c_str(), &st) == 0
           && S_ISDIR(st.st_mode) && st.st_uid == ::getuid()
           && ::access(dir.c_str(), W_OK) == 0;
  };
  for (auto& dir : candidates)
    if (usable(dir))
      return dir;
  return candidates.back();
}

caf::expected<std::shared_ptr<const mapped_file>>
cached_inflation(const std::string& dir, const std::string& source,
                 const std::string& member, uint64_t max_bytes,
                 const inflate_fn& inflate) {
  auto stamp = file_stamp::of(source);
  if (!stamp)
    return stamp.error();
  char resolved[PATH_MAX];
  std::string key = ::realpath(source.c_str(), resolved) != nullptr ? resolved
                                                                    : source;
  key += '\n' + member;
  // "train-images-idx3-ubyte.gz" is inflated into
  // "train-images-idx3-ubyte.<hash of its path>.<hash of its version>".
  auto base = source.substr(source.find_last_of('/') + 1);
  if (member.empty() && base.size() > 3
      && base.compare(base.size() - 3, 3, ".gz") == 0)
    base.resize(base.size() - 3);
  std::string prefix = file_safe(base)
                       + (member.empty() ? "" : "." + file_safe(member)) + "."
                       + hex(fnv1a(key)) + ".";
  std::string name = prefix
                     + hex(fnv1a(std::to_string(stamp->bytes) + "."
                                   + std::to_string(stamp->modified_ns),
                                 fnv1a(key)));
  std::string path = dir + "/" + name;
  if (::access(path.c_str(), F_OK) == 0)
    return map_file(path, max_bytes);
  if (auto err = make_folder(dir))
    return err;
  // Unique among processes (pid) and threads (a counter) that write the
  // same copy at once; each renames a whole copy into place.
  static std::atomic<uint64_t> writes{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "."
                    + std::to_string(writes++);
  file_io::fd_guard fd{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600)};
  if (fd.get() < 0)
    return folder_error(dir, "cannot write " + name);
  file_sink sink{fd.get(), tmp, max_bytes, source};
  auto err = inflate(sink);
  if (!err && ::fsync(fd.get()) != 0)
    err = folder_error(dir, "cannot write " + name);
  if (!err && ::close(fd.release()) != 0)
    err = folder_error(dir, "cannot write " + name);
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0)
    err = folder_error(dir, "cannot move " + name + " into place");
  if (err) {
    ::unlink(tmp.c_str());
    return err;
  }
  remove_older_copies(dir, prefix, name);
  return map_file(path, max_bytes);
}

} // namespace troupe
