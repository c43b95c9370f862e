#include "actors/net/cluster_key.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/errc.hpp"
#include "runtime/base/hex_text.hpp"

namespace troupe {

namespace {

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

caf::error key_error(const std::string& path, const std::string& why) {
  return make_error(errc::unauthorized, "cluster key " + path + ": " + why);
}

/// The folder part of `path` ("" for a bare name).
std::string folder_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string{} : path.substr(0, slash);
}

/// Makes `dir` and its missing parents, each new one 0700.
bool make_folders(const std::string& dir) {
  if (dir.empty())
    return true;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0)
    return S_ISDIR(st.st_mode);
  if (!make_folders(folder_of(dir)))
    return false;
  return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
}

} // namespace

cluster_key::cluster_key(bytes secret, std::string path)
  : secret_(secret), path_(std::move(path)) {
  static constexpr char label[] = "troupe cluster key id";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(label), sizeof(label) - 1,
           mac, &len)
      == nullptr)
    std::abort(); // no SHA-256 in this OpenSSL: nothing could be proven
  std::memcpy(id_bytes_.data(), mac, id_bytes_.size());
  id_ = to_hex(id_bytes_.data(), id_bytes_.size());
}

std::string default_key_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg == '/')
    return std::string{xdg} + "/troupe/cluster.key";
  const char* home = std::getenv("HOME");
  return std::string{home != nullptr && *home != '\0' ? home : "."}
         + "/.config/troupe/cluster.key";
}

caf::expected<cluster_key> load_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return key_error(
        path, "no such file. The first node of a run makes it on "
              "its host; on another host copy it from there, e.g. "
              "scp FIRST-HOST:"
                + path + " " + path + " (or name a copy with --key FILE)");
    return key_error(path, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    return key_error(path, "not a regular file");
  if (st.st_uid != ::geteuid())
    return key_error(path, "owned by another user (uid "
                             + std::to_string(st.st_uid)
                             + "): a key must be its user's own");
  if ((st.st_mode & 077) != 0)
    return key_error(path, "group or others may read it (mode "
                             + octal_mode(st.st_mode) + "): chmod 600 " + path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return key_error(path, std::strerror(errno));
  char text[256];
  auto got = ::read(fd, text, sizeof(text));
  ::close(fd);
  if (got < 0)
    return key_error(path, std::strerror(errno));
  size_t n = static_cast<size_t>(got);
  while (n > 0
         && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' '))
    --n;
  auto bad = [&] {
    return key_error(path, "expected 64 hex digits (256 bits) and a "
                           "newline, as the first node writes it");
  };
  if (n != 2 * cluster_key::size)
    return bad();
  cluster_key::bytes secret{};
  for (size_t i = 0; i < cluster_key::size; ++i) {
    int hi = hex_value(text[2 * i]);
    int lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return bad();
    secret[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return cluster_key{secret, path};
}

caf::expected<cluster_key> load_or_make_key(const std::string& path,
                                            bool& made) {
  made = false;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 || errno != ENOENT)
    return load_key(path);
  if (!make_folders(folder_of(path)))
    return key_error(path, "cannot make its folder: "
                             + std::string{std::strerror(errno)});
  cluster_key::bytes secret{};
  if (RAND_bytes(secret.data(), static_cast<int>(secret.size())) != 1)
    return key_error(path, "no random bytes from OpenSSL");
  // Written whole under a name of its own, then linked into place: a
  // reader never sees half a key, and link() fails when another process
  // got there first, whose key every process then uses.
  auto tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return key_error(path, "cannot write " + tmp + ": " + std::strerror(errno));
  auto text = to_hex(secret.data(), secret.size()) + "\n";
  bool written = ::write(fd, text.data(), text.size())
                   == static_cast<ssize_t>(text.size())
                 && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return key_error(path, "cannot write " + tmp);
  }
  int linked = ::link(tmp.c_str(), path.c_str());
  int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && link_errno != EEXIST)
    return key_error(path, std::strerror(link_errno));
  made = linked == 0;
  return load_key(path);
}

std::string describe(const cluster_key& key) {
  return "key " + key.id() + " in " + key.path();
}

} // namespace troupe
