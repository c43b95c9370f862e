// Checks the BASP stream a peer sends, header by header, before CAF's
// parser sees a byte of it: CAF 0.17 trusts its input (a 32-byte header of
// a handshake with no payload makes it dereference a null pointer; a
// header's length field makes it allocate up to 4 GiB before reading), so
// even a peer that proved the cluster key (a buggy or compromised member)
// could crash a node. A stream that fails the check is closed: only that
// connection, never the node.
//
// What holds for each 32-byte header (fields big-endian, as CAF writes
// them): the operation is one of BASP's seven; padding is zero and no
// unknown flag is set; the payload is at most max_payload bytes and is
// present exactly where the operation carries one (CAF's own validity
// rules, plus a payload for both handshakes); the first message is the
// peer's handshake (a client's on a connection we accepted, a server's on
// one we made), and neither handshake comes from the wrong side or a
// server's twice.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe {

class basp_check {
public:
  /// Which end of the connection we are.
  enum class side { accepted, connected };

  /// The largest payload a message may announce by default: above any
  /// message troupe sends (a shard's values travel in pieces of at most
  /// a shard), far below CAF's 4 GiB wrap.
  static constexpr uint32_t default_max_payload = 1u << 30;

  static constexpr size_t header_size = 32;

  explicit basp_check(side s, uint32_t max_payload = default_max_payload)
    : side_(s), max_payload_(max_payload) {}

  /// Takes the next `n` bytes the peer sent. Empty, or why the stream is
  /// refused (then every later call refuses too).
  std::string feed(const uint8_t* data, size_t n);

  /// Messages whose header passed.
  uint64_t messages() const { return messages_; }

private:
  std::string check_header();

  side side_;
  uint32_t max_payload_;
  std::array<uint8_t, header_size> header_{};
  size_t have_ = 0;
  uint64_t payload_left_ = 0;
  uint64_t messages_ = 0;
  std::string failed_;
};

} // namespace troupe
