// The data plane between two processes on one host: the same frames as on
// TCP (actors/data_plane/data_link.hpp), through two rings in memory both
// processes map, one per direction.
//
// Why: on loopback every parameter byte is copied by the kernel twice
// (into the socket's buffer, out of it) and each step wakes TCP's machinery;
// a profile of a 4 MB pull+push had the kernel's copies at 39% of the
// time. Here the writer copies a frame into the ring and the reader out of
// it, with the CPU's own wide copies, and nothing else runs in between.
//
// The segment is a memfd: it has no name in any file system, so nothing
// is left behind when both processes are gone, whatever killed them. The
// server makes it and four eventfds (each ring's "data" and "space"
// wake-ups) and hands them to the client over a Unix socket with
// SCM_RIGHTS (actors/data_plane/shared_upgrade.hpp); that socket stays
// open for the link's life, and its hang-up is how each side learns the
// other has gone, as a TCP connection's is. A waiting side sleeps in
// poll() on its eventfd and that socket; a side wakes the other only
// when the other has said it sleeps (a flag in the ring), so a stream of
// frames costs no system calls while both keep up.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "caf/expected.hpp"

#include "actors/net/byte_link.hpp"

namespace troupe {

/// The file descriptors of one shared link: its segment and its four
/// eventfds, in the order the server sends them. Closes what it holds.
struct shared_fds {
  static constexpr size_t count = 5;
  std::array<int, count> fds{-1, -1, -1, -1, -1};

  shared_fds() = default;
  shared_fds(shared_fds&& other) noexcept : fds(other.fds) {
    other.fds.fill(-1);
  }
  shared_fds& operator=(shared_fds&&) = delete;
  shared_fds(const shared_fds&) = delete;
  ~shared_fds();
};

/// One direction's counters, on cache lines of their own: `head` is
/// written by the writer alone, `tail` by the reader alone.
struct shared_ring_state {
  alignas(64) std::atomic<uint64_t> head{0}; ///< bytes written, ever
  alignas(64) std::atomic<uint64_t> tail{0}; ///< bytes read, ever
  alignas(64) std::atomic<uint32_t> reader_sleeps{0};
  std::atomic<uint32_t> writer_sleeps{0};
  std::atomic<uint32_t> closed{0}; ///< either side shut the link down
};

class shared_link final : public byte_link {
public:
  /// The bytes of each ring: a 4 MB pull streams through it while both
  /// sides copy, and both rings stay in a server core's cache (1 to 4
  /// MiB measured alike, within the noise, at 256 KiB published at a
  /// time).
  static constexpr uint64_t default_ring_bytes = uint64_t{2} << 20;

  /// A new segment with two rings of `ring_bytes` (a power of two, at
  /// least a page), and its descriptors to hand to the peer.
  static caf::expected<shared_fds> make_segment(uint64_t ring_bytes);

  /// The link over segment `fds` (made by make_segment here, or received
  /// from the peer). The server reads the first ring and writes the
  /// second; the client the other way round. `peer` names the peer in
  /// messages. Usable once it has its peer socket.
  static caf::expected<std::shared_ptr<shared_link>>
  open(const shared_fds& fds, bool server, std::string peer);

  /// Takes over `fd`, the Unix socket to the peer, as the sign of the
  /// peer's life: its hang-up ends the link.
  void take_peer_socket(int fd) { peer_socket_ = fd; }

  ~shared_link() override;

  bool read_exact(void* data, size_t n) override;
  written write(const void* head, size_t head_len, const void* body,
                size_t body_len, size_t& done, bool wait) override;
  void shutdown() override;
  std::string peer() const override;

  shared_link(const shared_link&) = delete;
  shared_link& operator=(const shared_link&) = delete;

private:
  shared_link() = default;

  /// Sleeps until `event` is signalled or the link ends; false when the
  /// link has ended (the peer hung up, or either side shut it down).
  bool sleep_on(int event);
  /// Whether either side shut the link down.
  bool closed() const;

  void* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  uint64_t ring_bytes_ = 0;
  shared_ring_state* in_ = nullptr;  ///< the ring this side reads
  shared_ring_state* out_ = nullptr; ///< the ring this side writes
  char* in_data_ = nullptr;
  char* out_data_ = nullptr;
  int in_data_event_ = -1;   ///< the peer wrote: this side's reader wakes
  int in_space_event_ = -1;  ///< this side read: the peer's writer wakes
  int out_data_event_ = -1;  ///< this side wrote: the peer's reader wakes
  int out_space_event_ = -1; ///< the peer read: this side's writer wakes
  int peer_socket_ = -1;
  std::string peer_;
};

/// This host's boot id (/proc/sys/kernel/random/boot_id): two processes
/// with the same one run on the same kernel. Empty when unreadable.
std::string host_boot_id();

} // namespace troupe
