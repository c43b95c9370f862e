#include "runtime/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/errc.hpp"

namespace troupe {

namespace {

static_assert(sizeof(float) == 4, "F32 tensors need 4-byte floats");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this writer copies host floats"
#endif

constexpr const char* format_name = "troupe-checkpoint";
constexpr const char* format_version = "1";

using json = nlohmann::json;

caf::error io_error(const std::string& path, const std::string& what) {
  return make_error(errc::io_error,
                    path + ": " + what + ": " + std::strerror(errno));
}

caf::error format_error(const std::string& path, const std::string& what) {
  return make_error(errc::bad_format, path + ": " + what);
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

bool write_all(int fd, const void* data, size_t n) {
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

std::string parent_dir(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos)
    return ".";
  return pos == 0 ? "/" : path.substr(0, pos);
}

} // namespace

caf::error write_checkpoint(const std::string& path, const checkpoint& ckpt) {
  const size_t total = ckpt.layout.total();
  if (ckpt.params.size() != total)
    return make_error(errc::wrong_size,
                      path + ": params have " + std::to_string(ckpt.params.size())
                        + " values, layout needs " + std::to_string(total));
  for (auto& [name, values] : ckpt.slots)
    if (values.size() != total)
      return make_error(errc::wrong_size,
                        path + ": optimizer slot " + name + " has "
                          + std::to_string(values.size()) + " values, needs "
                          + std::to_string(total));
  // Header: one entry per tensor per vector, offsets in bytes from the start
  // of the data section.
  json header = json::object();
  json meta = json::object();
  for (auto& [key, value] : ckpt.metadata) {
    // The file's own keys: a caller's value there would be overwritten on
    // write and dropped on read, silently.
    if (key == "format" || key == "version" || key == "step")
      return make_error(errc::invalid_argument,
                        path + ": metadata key \"" + key
                          + "\" is reserved for the checkpoint format");
    meta[key] = value;
  }
  meta["format"] = format_name;
  meta["version"] = format_version;
  meta["step"] = std::to_string(ckpt.step);
  header["__metadata__"] = meta;
  std::vector<std::pair<std::string, const std::vector<float>*>> vectors;
  vectors.emplace_back("params", &ckpt.params);
  for (auto& [name, values] : ckpt.slots)
    vectors.emplace_back(name, &values);
  size_t offset = 0;
  for (auto& [prefix, values] : vectors)
    for (auto& t : ckpt.layout.tensors()) {
      size_t bytes = t.size * sizeof(float);
      header[prefix + "/" + t.name] = {{"dtype", "F32"},
                                       {"shape", t.dims},
                                       {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
    }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' '); // align the data to 8 bytes
  uint64_t len = text.size();
  unsigned char len_le[8];
  for (int i = 0; i < 8; ++i)
    len_le[i] = static_cast<unsigned char>(len >> (8 * i));

  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  fd_guard fd{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                     0644)};
  if (fd.get() < 0)
    return io_error(tmp, "cannot create");
  bool ok = write_all(fd.get(), len_le, 8)
            && write_all(fd.get(), text.data(), text.size());
  for (auto& [prefix, values] : vectors)
    ok = ok && write_all(fd.get(), values->data(), total * sizeof(float));
  if (!ok || ::fsync(fd.get()) != 0) {
    auto err = io_error(tmp, "write failed");
    ::unlink(tmp.c_str());
    return err;
  }
  if (::close(fd.release()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = io_error(path, "cannot move the new checkpoint into place");
    ::unlink(tmp.c_str());
    return err;
  }
  // Make the rename itself durable.
  fd_guard dir{::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY)};
  if (dir.get() >= 0)
    ::fsync(dir.get());
  return caf::none;
}

caf::expected<checkpoint> read_checkpoint(const std::string& path) {
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.get() < 0) {
    if (errno == ENOENT)
      return make_error(errc::file_not_found, path + ": no such file");
    return io_error(path, "cannot open");
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return io_error(path, "cannot stat");
  auto file_size = static_cast<uint64_t>(st.st_size);
  std::vector<char> bytes(static_cast<size_t>(file_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t r = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return io_error(path, "read failed");
    got += static_cast<size_t>(r);
  }
  if (file_size < 8)
    return format_error(path, "truncated: " + std::to_string(file_size)
                                + " bytes, not even a safetensors header");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t{static_cast<unsigned char>(bytes[static_cast<size_t>(i)])}
           << (8 * i);
  if (len > file_size - 8)
    return format_error(path, "truncated: header claims " + std::to_string(len)
                                + " bytes, file has "
                                + std::to_string(file_size - 8)
                                + " after the length");
  json header;
  try {
    header = json::parse(bytes.begin() + 8,
                         bytes.begin() + 8 + static_cast<std::ptrdiff_t>(len));
  } catch (const json::exception& e) {
    return format_error(path, std::string{"corrupt safetensors header: "}
                                + e.what());
  }
  const uint64_t data_size = file_size - 8 - len;
  const char* data = bytes.data() + 8 + len;
  checkpoint out;
  try {
    if (!header.is_object() || !header.contains("__metadata__"))
      return format_error(path, "not a troupe checkpoint (no __metadata__)");
    auto& meta = header.at("__metadata__");
    if (!meta.is_object() || meta.value("format", "") != format_name)
      return format_error(path, "not a troupe checkpoint (metadata format is "
                                  "not \"troupe-checkpoint\")");
    if (meta.value("version", "") != format_version)
      return format_error(path, "unsupported checkpoint version \""
                                  + meta.value("version", "") + "\", this "
                                  "build reads version 1");
    for (auto& [key, value] : meta.items()) {
      if (!value.is_string())
        return format_error(path, "metadata " + key + " is not a string");
      if (key != "format" && key != "version" && key != "step")
        out.metadata[key] = value.get<std::string>();
    }
    try {
      out.step = std::stoll(meta.value("step", ""));
    } catch (const std::exception&) {
      return format_error(path, "metadata step is not an integer");
    }
    // Collect tensors, ordered by data offset (JSON objects are unordered).
    struct entry {
      std::string prefix, name;
      shape dims;
      uint64_t begin, end;
    };
    std::vector<entry> entries;
    for (auto& [key, value] : header.items()) {
      if (key == "__metadata__")
        continue;
      auto slash = key.find('/');
      if (slash == std::string::npos)
        return format_error(path, "tensor \"" + key
                                    + "\" is not named <vector>/<tensor>");
      if (value.at("dtype").get<std::string>() != "F32")
        return format_error(path, "tensor " + key + " has dtype "
                                    + value.at("dtype").get<std::string>()
                                    + ", expected F32");
      entry e{key.substr(0, slash), key.substr(slash + 1),
              value.at("shape").get<shape>(),
              value.at("data_offsets").at(0).get<uint64_t>(),
              value.at("data_offsets").at(1).get<uint64_t>()};
      uint64_t want = static_cast<uint64_t>(element_count(e.dims))
                      * sizeof(float);
      if (e.end < e.begin || e.end - e.begin != want)
        return format_error(path, "tensor " + key + " has "
                                    + std::to_string(e.end - e.begin)
                                    + " bytes of data, its shape needs "
                                    + std::to_string(want));
      if (e.end > data_size)
        return format_error(path, "truncated: tensor " + key + " ends at byte "
                                    + std::to_string(e.end)
                                    + " of a data section of "
                                    + std::to_string(data_size));
      entries.push_back(std::move(e));
    }
    std::sort(entries.begin(), entries.end(),
              [](const entry& a, const entry& b) { return a.begin < b.begin; });
    for (auto& e : entries)
      if (e.prefix == "params")
        out.layout.add(e.name, e.dims);
    if (out.layout.tensors().empty())
      return format_error(path, "holds no params/ tensors");
    const size_t total = out.layout.total();
    auto fill = [&](const std::string& prefix,
                    std::vector<float>& dst) -> caf::error {
      dst.resize(total);
      for (auto& t : out.layout.tensors()) {
        auto it = std::find_if(entries.begin(), entries.end(), [&](auto& e) {
          return e.prefix == prefix && e.name == t.name;
        });
        if (it == entries.end() || it->dims != t.dims)
          return format_error(path, prefix + "/" + t.name
                                      + " is missing or has the wrong shape");
        std::memcpy(dst.data() + t.offset, data + it->begin,
                    t.size * sizeof(float));
      }
      return caf::none;
    };
    if (auto err = fill("params", out.params))
      return err;
    std::vector<std::string> prefixes;
    for (auto& e : entries)
      if (e.prefix != "params"
          && std::find(prefixes.begin(), prefixes.end(), e.prefix)
               == prefixes.end())
        prefixes.push_back(e.prefix);
    for (auto& prefix : prefixes) {
      out.slots.emplace_back(prefix, std::vector<float>{});
      if (auto err = fill(prefix, out.slots.back().second))
        return err;
    }
  } catch (const json::exception& e) {
    return format_error(path, std::string{"corrupt safetensors header: "}
                                + e.what());
  } catch (const std::invalid_argument& e) {
    return format_error(path, e.what());
  }
  return out;
}

caf::error check_layout(const checkpoint& ckpt, const param_layout& expected,
                        const std::string& path) {
  if (auto err = expected.compare(ckpt.layout))
    return make_error(errc::layout_mismatch,
                      path + ": checkpoint does not fit this model: "
                        + describe(err));
  return caf::none;
}

} // namespace troupe
