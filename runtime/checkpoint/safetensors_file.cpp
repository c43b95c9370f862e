#include "runtime/checkpoint/safetensors_file.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_io.hpp"
#include "runtime/base/json_text.hpp"

namespace troupe {

using namespace file_io;
using json = nlohmann::json;

caf::expected<safetensors_file> read_safetensors_file(const std::string& path,
                                                      bool whole) {
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.get() < 0) {
    if (errno == ENOENT)
      return make_error(errc::file_not_found, path + ": no such file");
    return io_error(path, "cannot open");
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return io_error(path, "cannot stat");
  if (!S_ISREG(st.st_mode))
    return format_error(path, "not a regular file");
  safetensors_file out;
  out.file_size = static_cast<uint64_t>(st.st_size);
  auto read_at = [&](char* dst, uint64_t n, uint64_t at) {
    return pread_all(fd.get(), dst, n, at);
  };
  if (out.file_size < 8)
    return format_error(path, "truncated: " + std::to_string(out.file_size)
                                + " bytes, not even a safetensors header");
  char len_bytes[8];
  if (!read_at(len_bytes, 8, 0))
    return io_error(path, "read failed");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t{static_cast<unsigned char>(len_bytes[i])} << (8 * i);
  if (len > out.file_size - 8)
    return format_error(path, "truncated: header claims " + std::to_string(len)
                                + " bytes, file has "
                                + std::to_string(out.file_size - 8)
                                + " after the length");
  if (len > max_header_bytes)
    return format_error(path, "a header of " + std::to_string(len)
                                + " bytes (at most "
                                + std::to_string(max_header_bytes) + ")");
  out.header_len = len;
  std::vector<char> head;
  std::vector<char>* into = &head;
  if (whole) {
    out.bytes.resize(static_cast<size_t>(out.file_size));
    into = &out.bytes;
    if (!read_at(out.bytes.data(), out.file_size, 0))
      return io_error(path, "read failed");
  } else {
    head.resize(static_cast<size_t>(len) + 8);
    if (!read_at(head.data(), len + 8, 0))
      return io_error(path, "read failed");
  }
  // Depth is bounded: safetensors headers are three levels deep.
  const char* text = into->data() + 8;
  if (nested_deeper_than(text, text + len, 8))
    return format_error(path, "corrupt safetensors header: nested deeper "
                              "than a safetensors header is");
  try {
    out.header = json::parse(text, text + len);
  } catch (const json::exception& e) {
    return format_error(path,
                        std::string{"corrupt safetensors header: "} + e.what());
  }
  return out;
}

caf::expected<tensor_extent>
read_f32_extent(const std::string& path, const std::string& key,
                const json& value, uint64_t data_size, size_t element_bytes) {
  if (!value.is_object() || !value.contains("shape")
      || !value.contains("data_offsets"))
    return format_error(path, "tensor " + key
                                + " is not an object with a "
                                  "shape and data_offsets");
  auto& dims = value.at("shape");
  auto& offsets = value.at("data_offsets");
  if (!dims.is_array() || dims.size() > 8 || !offsets.is_array()
      || offsets.size() != 2 || !offsets[0].is_number_unsigned()
      || !offsets[1].is_number_unsigned())
    return format_error(path, "tensor " + key
                                + " has a malformed shape "
                                  "or data_offsets");
  tensor_extent e;
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  uint64_t count = 1; // a scalar (shape []) is one value
  for (auto& d : dims) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > data_size)
      return format_error(path, "tensor " + key
                                  + " has a dimension that is "
                                    "not an integer within the file: "
                                  + d.dump());
    if (d.get<uint64_t>() == 0)
      return format_error(path, "tensor " + key + " has no elements (shape "
                                  + dims.dump() + ")");
    count *= d.get<uint64_t>();
    if (count > data_size)
      return format_error(path, "tensor " + key
                                  + " has a shape larger "
                                    "than the file's data");
    e.dims.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  uint64_t want = count * element_bytes;
  if (e.end < e.begin || e.end - e.begin != want)
    return format_error(
      path, "tensor " + key + " has " + std::to_string(e.end - e.begin)
              + " bytes of data, its shape needs " + std::to_string(want));
  if (e.end > data_size)
    return format_error(path, "truncated: tensor " + key + " ends at byte "
                                + std::to_string(e.end)
                                + " of a data section of "
                                + std::to_string(data_size));
  return e;
}

caf::error
write_safetensors_file(const std::string& path, const nlohmann::json& header,
                       const std::vector<const std::vector<float>*>& data) {
  static_assert(sizeof(float) == 4, "F32 tensors need 4-byte floats");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this writer copies host floats"
#endif
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' '); // align the data to 8 bytes
  uint64_t len = text.size();
  unsigned char len_le[8];
  for (int i = 0; i < 8; ++i)
    len_le[i] = static_cast<unsigned char>(len >> (8 * i));

  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  fd_guard fd{
    ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (fd.get() < 0)
    return io_error(tmp, "cannot create");
  bool ok = write_all(fd.get(), len_le, 8)
            && write_all(fd.get(), text.data(), text.size());
  for (auto* values : data)
    ok = ok
         && write_all(fd.get(), values->data(), values->size() * sizeof(float));
  if (!ok || ::fsync(fd.get()) != 0) {
    auto err = io_error(tmp, "write failed");
    ::unlink(tmp.c_str());
    return err;
  }
  if (::close(fd.release()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = io_error(path, "cannot move the new file into place");
    ::unlink(tmp.c_str());
    return err;
  }
  // Make the rename itself durable.
  fd_guard dir{::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY)};
  if (dir.get() >= 0)
    ::fsync(dir.get());
  return caf::none;
}

} // namespace troupe
