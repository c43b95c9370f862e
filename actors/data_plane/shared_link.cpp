#include "actors/data_plane/shared_link.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// The segment's first page: what it is, and the two rings' counters.
/// The rings' bytes follow, each `ring_bytes` long.
struct segment_header {
  static constexpr uint64_t magic_value = 0x4b4e494c53525254; // "TRRSLINK"
  uint64_t magic = magic_value;
  uint64_t ring_bytes = 0;
  shared_ring_state rings[2]; ///< 0: client to server, 1: server to client
};

constexpr uint64_t page = 4096;

/// Each side makes what it copied known to the other at least every this
/// many bytes: the reader starts on a large frame while the writer still
/// copies the rest, and the writer refills what the reader freed. (A 4 MB
/// pull+push at 2 MiB rings: 3,600-3,900 MB/s publishing whole rings'
/// worth at a time, 4,500-4,900 at 256 KiB; 64 KiB was no better.)
constexpr uint64_t publish_bytes = 256 * 1024;
static_assert(sizeof(segment_header) <= page, "the header fits one page");
static_assert(std::atomic<uint64_t>::is_always_lock_free
                && std::atomic<uint32_t>::is_always_lock_free,
              "atomics in shared memory must not hide a lock");

uint64_t segment_bytes(uint64_t ring_bytes) {
  return page + 2 * ring_bytes;
}

caf::error system_error(const std::string& what) {
  return make_error(errc::io_error, what + ": " + std::strerror(errno));
}

void signal_event(int event) {
  uint64_t one = 1;
  // A full counter (2^64 - 2 wake-ups unread) cannot happen; EINTR can.
  while (::write(event, &one, sizeof(one)) < 0 && errno == EINTR) {}
}

void drain_event(int event) {
  uint64_t count;
  while (::read(event, &count, sizeof(count)) < 0 && errno == EINTR) {}
}

} // namespace

shared_fds::~shared_fds() {
  for (int fd : fds)
    if (fd >= 0)
      ::close(fd);
}

caf::expected<shared_fds> shared_link::make_segment(uint64_t ring_bytes) {
  if (ring_bytes < page || (ring_bytes & (ring_bytes - 1)) != 0)
    return make_error(errc::invalid_argument,
                      "a shared ring of " + std::to_string(ring_bytes)
                        + " bytes (a power of two, at least a page)");
  shared_fds out;
  out.fds[0] = ::memfd_create("troupe-data-plane", MFD_CLOEXEC);
  if (out.fds[0] < 0)
    return system_error("memfd_create");
  if (::ftruncate(out.fds[0], static_cast<off_t>(segment_bytes(ring_bytes)))
      != 0)
    return system_error("sizing the shared segment");
  for (size_t i = 1; i < shared_fds::count; ++i) {
    out.fds[i] = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (out.fds[i] < 0)
      return system_error("eventfd");
  }
  auto* map = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED,
                     out.fds[0], 0);
  if (map == MAP_FAILED)
    return system_error("mapping the shared segment");
  auto* header = new (map) segment_header;
  header->ring_bytes = ring_bytes;
  ::munmap(map, page);
  return out;
}

caf::expected<std::shared_ptr<shared_link>>
shared_link::open(const shared_fds& fds, bool server, std::string peer) {
  std::shared_ptr<shared_link> link{new shared_link};
  link->peer_ = std::move(peer);
  struct stat st {};
  if (::fstat(fds.fds[0], &st) != 0)
    return system_error("the shared segment");
  // The peer's word on the ring's size is checked against the segment
  // itself before anything is mapped by it.
  auto* first = ::mmap(nullptr, page, PROT_READ, MAP_SHARED, fds.fds[0], 0);
  if (first == MAP_FAILED)
    return system_error("mapping the shared segment");
  auto claimed = static_cast<const segment_header*>(first)->ring_bytes;
  auto magic = static_cast<const segment_header*>(first)->magic;
  ::munmap(first, page);
  auto size = static_cast<uint64_t>(st.st_size);
  if (magic != segment_header::magic_value || claimed < page
      || (claimed & (claimed - 1)) != 0 || size != segment_bytes(claimed))
    return make_error(errc::invalid_argument,
                      "the shared segment (" + std::to_string(size)
                        + " bytes) is not a troupe data-plane segment");
  link->ring_bytes_ = claimed;
  link->map_bytes_ = size;
  link->map_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      fds.fds[0], 0);
  if (link->map_ == MAP_FAILED) {
    link->map_ = nullptr;
    return system_error("mapping the shared segment");
  }
  auto* header = static_cast<segment_header*>(link->map_);
  auto* base = static_cast<char*>(link->map_) + page;
  int in = server ? 0 : 1;
  link->in_ = &header->rings[in];
  link->out_ = &header->rings[1 - in];
  link->in_data_ = base + in * claimed;
  link->out_data_ = base + (1 - in) * claimed;
  // fds: the segment, then each ring's data and space events.
  auto dup_of = [&](int fd) { return ::fcntl(fd, F_DUPFD_CLOEXEC, 0); };
  link->in_data_event_ = dup_of(fds.fds[1 + 2 * in]);
  link->in_space_event_ = dup_of(fds.fds[2 + 2 * in]);
  link->out_data_event_ = dup_of(fds.fds[1 + 2 * (1 - in)]);
  link->out_space_event_ = dup_of(fds.fds[2 + 2 * (1 - in)]);
  if (link->in_data_event_ < 0 || link->in_space_event_ < 0
      || link->out_data_event_ < 0 || link->out_space_event_ < 0)
    return system_error("the shared link's events");
  for (int e : {link->in_data_event_, link->out_space_event_})
    if (::fcntl(e, F_SETFL, ::fcntl(e, F_GETFL) | O_NONBLOCK) != 0)
      return system_error("the shared link's events");
  return link;
}

shared_link::~shared_link() {
  if (map_ != nullptr)
    ::munmap(map_, map_bytes_);
  for (int fd : {in_data_event_, in_space_event_, out_data_event_,
                 out_space_event_, peer_socket_})
    if (fd >= 0)
      ::close(fd);
}

std::string shared_link::peer() const {
  return peer_ + " (shared memory)";
}

bool shared_link::closed() const {
  return in_->closed.load(std::memory_order_acquire) != 0
         || out_->closed.load(std::memory_order_acquire) != 0;
}

void shared_link::shutdown() {
  in_->closed.store(1, std::memory_order_seq_cst);
  out_->closed.store(1, std::memory_order_seq_cst);
  // Shutting the socket down wakes every poll on it, here and at the
  // peer, whoever sleeps on which event.
  ::shutdown(peer_socket_, SHUT_RDWR);
}

bool shared_link::sleep_on(int event) {
  pollfd p[2] = {{event, POLLIN, 0}, {peer_socket_, POLLIN | POLLRDHUP, 0}};
  for (;;) {
    if (closed())
      return false;
    auto rc = ::poll(p, 2, -1);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0)
      return false;
    // Nothing is sent on the socket after the hand-over: anything it
    // says is its end.
    if (p[1].revents != 0)
      return false;
    if (p[0].revents != 0) {
      drain_event(event);
      return true;
    }
  }
}

bool shared_link::read_exact(void* data, size_t n) {
  auto* to = static_cast<char*>(data);
  auto mask = ring_bytes_ - 1;
  // Only this side moves the tail.
  auto tail = in_->tail.load(std::memory_order_relaxed);
  while (n > 0) {
    auto head = in_->head.load(std::memory_order_acquire);
    auto ready = head - tail;
    if (ready > ring_bytes_)
      return false; // not what a writer of this ring can do: the link ends
    if (ready == 0) {
      if (closed())
        return false;
      in_->reader_sleeps.store(1, std::memory_order_seq_cst);
      bool still_empty = in_->head.load(std::memory_order_seq_cst) == tail;
      bool awake = !still_empty || sleep_on(in_data_event_);
      in_->reader_sleeps.store(0, std::memory_order_relaxed);
      if (!awake && in_->head.load(std::memory_order_acquire) == tail)
        return false;
      continue;
    }
    auto take = std::min<uint64_t>({ready, n, publish_bytes});
    auto at = tail & mask;
    auto first = std::min<uint64_t>(take, ring_bytes_ - at);
    std::memcpy(to, in_data_ + at, first);
    std::memcpy(to + first, in_data_, take - first);
    to += take;
    n -= take;
    tail += take;
    in_->tail.store(tail, std::memory_order_seq_cst);
    if (in_->writer_sleeps.load(std::memory_order_seq_cst) != 0)
      signal_event(in_space_event_);
  }
  return true;
}

written shared_link::write(const void* head_bytes, size_t head_len,
                           const void* body, size_t body_len, size_t& done,
                           bool wait) {
  auto mask = ring_bytes_ - 1;
  auto total = head_len + body_len;
  // Only this side moves the head.
  auto head = out_->head.load(std::memory_order_relaxed);
  while (done < total) {
    if (closed())
      return written::failed;
    auto used = head - out_->tail.load(std::memory_order_acquire);
    if (used > ring_bytes_)
      return written::failed;
    auto room = ring_bytes_ - used;
    if (room == 0) {
      if (!wait)
        return written::some;
      out_->writer_sleeps.store(1, std::memory_order_seq_cst);
      bool still_full = head - out_->tail.load(std::memory_order_seq_cst)
                        == ring_bytes_;
      bool awake = !still_full || sleep_on(out_space_event_);
      out_->writer_sleeps.store(0, std::memory_order_relaxed);
      if (!awake)
        return written::failed;
      continue;
    }
    // The bytes from `done` on: the rest of the header, then the body.
    auto take = std::min<uint64_t>({room, total - done, publish_bytes});
    for (uint64_t copied = 0; copied < take;) {
      auto from = done + copied;
      const char* src = from < head_len
                          ? static_cast<const char*>(head_bytes) + from
                          : static_cast<const char*>(body) + (from - head_len);
      auto piece = std::min<uint64_t>(
        take - copied, from < head_len ? head_len - from : total - from);
      auto at = (head + copied) & mask;
      auto first = std::min<uint64_t>(piece, ring_bytes_ - at);
      std::memcpy(out_data_ + at, src, first);
      std::memcpy(out_data_, src + first, piece - first);
      copied += piece;
    }
    head += take;
    done += take;
    out_->head.store(head, std::memory_order_seq_cst);
    if (out_->reader_sleeps.load(std::memory_order_seq_cst) != 0)
      signal_event(out_data_event_);
  }
  return written::all;
}

std::string host_boot_id() {
  std::ifstream in{"/proc/sys/kernel/random/boot_id"};
  std::string id;
  std::getline(in, id);
  return id;
}

} // namespace troupe
