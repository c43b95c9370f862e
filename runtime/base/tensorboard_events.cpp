#include "runtime/base/tensorboard_events.hpp"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// The table of the reflected Castagnoli polynomial, one byte at a time.
constexpr std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) != 0 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t masked_crc(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Protocol buffers' wire format, as much of it as an Event needs.

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void tag(std::string& out, uint32_t field, uint32_t wire_type) {
  varint(out, (uint64_t{field} << 3) | wire_type);
}

template <class T>
void little_endian(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T)); // x86 and ARM Linux: little-endian
  out.append(bytes, sizeof(T));
}

void bytes_field(std::string& out, uint32_t field, std::string_view v) {
  tag(out, field, 2);
  varint(out, v.size());
  out.append(v);
}

/// Event's wall_time (1, double) and step (2, int64).
std::string event_head(int64_t step) {
  std::string e;
  tag(e, 1, 1);
  little_endian(e, std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count());
  if (step != 0) {
    tag(e, 2, 0);
    varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

} // namespace

uint32_t crc32c(std::string_view data) {
  static constexpr auto table = crc32c_table();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data)
    c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

caf::error tensorboard_events::open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::io_error,
                      dir + ": cannot make the TensorBoard folder: "
                        + ec.message());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  path_ = dir + "/events.out.tfevents." + std::to_string(now) + "." + host + "."
          + std::to_string(getpid());
  file_.reset(std::fopen(path_.c_str(), "ab"));
  if (!file_)
    return make_error(errc::io_error,
                      path_ + ": cannot write: " + std::strerror(errno));
  auto e = event_head(0);
  bytes_field(e, 3, "brain.Event:2"); // file_version
  record(e);
  return {};
}

void tensorboard_events::scalar(const std::string& name, int64_t step,
                                double v) {
  if (!file_)
    return;
  std::string value;
  bytes_field(value, 1, name); // Summary.Value.tag
  tag(value, 2, 5);            // simple_value, a float
  little_endian(value, static_cast<float>(v));
  std::string summary;
  bytes_field(summary, 1, value); // Summary.value
  auto e = event_head(step);
  bytes_field(e, 5, summary); // Event.summary
  record(e);
}

void tensorboard_events::record(const std::string& event) {
  std::string r;
  little_endian(r, static_cast<uint64_t>(event.size()));
  little_endian(r, masked_crc(r));
  r += event;
  little_endian(r, masked_crc(event));
  std::fwrite(r.data(), 1, r.size(), file_.get());
  std::fflush(file_.get());
}

} // namespace troupe
