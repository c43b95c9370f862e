#include "actors/net/basp_check.hpp"

#include <algorithm>
#include <cstring>

namespace troupe {

namespace {

// BASP 0.17's operations (caf/io/basp/message_type.hpp).
enum op : uint8_t {
  server_handshake = 0,
  client_handshake = 1,
  direct_message = 2,
  routed_message = 3,
  monitor_message = 4,
  down_message = 5,
  heartbeat = 6,
};

constexpr uint8_t known_flags = 0x01 | 0x02; // named receiver, select conn.

uint64_t big_endian(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v = v << 8 | p[i];
  return v;
}

const char* op_name(uint8_t op) {
  static const char* names[] = {"server handshake", "client handshake",
                                "direct message",   "routed message",
                                "monitor message",  "down message",
                                "heartbeat"};
  return op <= heartbeat ? names[op] : "unknown operation";
}

} // namespace

std::string basp_check::feed(const uint8_t* data, size_t n) {
  while (n > 0 && failed_.empty()) {
    if (payload_left_ > 0) {
      auto skip = static_cast<size_t>(std::min<uint64_t>(payload_left_, n));
      payload_left_ -= skip;
      data += skip;
      n -= skip;
      continue;
    }
    auto take = std::min(n, header_size - have_);
    std::memcpy(header_.data() + have_, data, take);
    have_ += take;
    data += take;
    n -= take;
    if (have_ < header_size)
      break;
    have_ = 0;
    failed_ = check_header();
    if (failed_.empty())
      ++messages_;
  }
  return failed_;
}

std::string basp_check::check_header() {
  const auto* h = header_.data();
  uint8_t op = h[0];
  uint8_t flags = h[3];
  auto payload = static_cast<uint32_t>(big_endian(h + 4, 4));
  auto op_data = big_endian(h + 8, 8);
  auto source = big_endian(h + 16, 8);
  auto dest = big_endian(h + 24, 8);
  // The message is made only for a refusal: this runs for every message
  // a link carries.
  auto refuse = [&](const std::string& why) {
    return "BASP header " + std::to_string(messages_ + 1) + " (" + op_name(op)
           + ", payload " + std::to_string(payload) + " bytes): " + why;
  };
  if (op > heartbeat)
    return refuse("operation " + std::to_string(op) + " is not BASP's");
  if (h[1] != 0 || h[2] != 0)
    return refuse("padding is not zero");
  if ((flags & ~known_flags) != 0)
    return refuse("unknown flags " + std::to_string(flags));
  if (payload > max_payload_)
    return refuse("payload over the bound of " + std::to_string(max_payload_)
                  + " bytes");
  bool first = messages_ == 0;
  bool accepted = side_ == side::accepted;
  if (first && op != (accepted ? client_handshake : server_handshake))
    return refuse(std::string{"the first message must be the "}
                  + (accepted ? "client's" : "server's") + " handshake");
  if (op == server_handshake && (accepted || !first))
    return refuse("a server handshake only opens a connection we made");
  if (op == client_handshake && !accepted)
    return refuse("a client handshake on a connection we made");
  // CAF's own rules (caf/io/basp/header.cpp valid()), plus a payload for
  // both handshakes: CAF reads one without checking that it came.
  bool ok = true;
  switch (op) {
    case server_handshake: ok = op_data != 0 && payload > 0; break;
    case client_handshake: ok = source == 0 && dest == 0 && payload > 0; break;
    case direct_message:
    case routed_message: ok = dest != 0 && payload > 0; break;
    case monitor_message: ok = payload > 0 && op_data == 0; break;
    case down_message:
      ok = source != 0 && dest == 0 && payload > 0 && op_data == 0;
      break;
    case heartbeat:
      ok = source == 0 && dest == 0 && payload == 0 && op_data == 0;
      break;
  }
  if (!ok)
    return refuse("its fields do not fit the operation");
  payload_left_ = payload;
  return {};
}

} // namespace troupe
