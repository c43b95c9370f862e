#include "actors/data_plane/shared_upgrade.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "actors/data_plane/shared_link.hpp"
#include "caf/settings.hpp"

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

using clock_type = std::chrono::steady_clock;

/// How long the server waits for its client on the Unix socket, and each
/// side for the other's next word there: a client on this host that got
/// the answer connects at once, so this only bounds a client that died
/// in between.
constexpr auto hand_over_time = std::chrono::seconds(5);

/// A file descriptor closed when it goes out of scope, unless released.
struct owned_fd {
  int fd = -1;
  explicit owned_fd(int f) : fd(f) {}
  owned_fd(const owned_fd&) = delete;
  owned_fd& operator=(const owned_fd&) = delete;
  ~owned_fd() {
    if (fd >= 0)
      ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

/// Waits for `events` on `fd` until `deadline`; false on timeout or error.
bool wait_until(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - clock_type::now());
    if (left.count() <= 0)
      return false;
    pollfd p{fd, events, 0};
    auto rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0)
      return true;
    if (rc < 0 && errno != EINTR)
      return false;
  }
}

/// Reads exactly n bytes from a non-blocking socket by `deadline`.
bool read_within(int fd, void* data, size_t n,
                 clock_type::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    auto got = ::recv(fd, p, n, MSG_DONTWAIT);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0 || (errno != EAGAIN && errno != EINTR))
      return false;
    if (!wait_until(fd, POLLIN, deadline))
      return false;
  }
  return true;
}

bool send_byte(int fd, char c) {
  return ::send(fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // An abstract name: a NUL, then the name; nothing in the file system.
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1
                               + name.size());
  return addr;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()),
                 static_cast<int>(bytes))
      != 1)
    return {};
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

/// Writes a whole frame (header and text) on `tcp`.
bool write_text_frame(link_socket& tcp, data_frame f, const std::string& text) {
  f.count = text.size();
  size_t done = 0;
  return tcp.write(&f, sizeof(f), text.data(), text.size(), done, true)
         == written::all;
}

/// One byte and room for a link's descriptors, as sendmsg and recvmsg
/// take them.
struct fd_message {
  char byte = 'S';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * shared_fds::count)]{};
  msghdr msg{};

  fd_message() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  fd_message(const fd_message&) = delete;
  fd_message& operator=(const fd_message&) = delete;
};

/// The server's descriptors go to the client with one byte of data.
bool send_fds(int sock, const shared_fds& fds) {
  fd_message m;
  auto* cm = CMSG_FIRSTHDR(&m.msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * shared_fds::count);
  std::memcpy(CMSG_DATA(cm), fds.fds.data(), sizeof(int) * shared_fds::count);
  return ::sendmsg(sock, &m.msg, MSG_NOSIGNAL) == 1;
}

/// Receives what send_fds sent; false unless exactly that came. What
/// descriptors came are in `out` either way, which closes them.
bool receive_fds(int sock, shared_fds& out, clock_type::time_point deadline) {
  if (!wait_until(sock, POLLIN, deadline))
    return false;
  fd_message m;
  m.byte = 0;
  auto got = ::recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  auto* cm = got == 1 ? CMSG_FIRSTHDR(&m.msg) : nullptr;
  size_t came = 0;
  if (cm != nullptr && cm->cmsg_level == SOL_SOCKET
      && cm->cmsg_type == SCM_RIGHTS) {
    came = std::min<size_t>((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int),
                            shared_fds::count);
    std::memcpy(out.fds.data(), CMSG_DATA(cm), came * sizeof(int));
  }
  return m.byte == 'S' && (m.msg.msg_flags & MSG_CTRUNC) == 0
         && came == shared_fds::count;
}

} // namespace

bool shared_links_allowed(caf::actor_system& sys) {
  return caf::get_or(sys.config(), "troupe.shared-memory", true);
}

caf::expected<std::shared_ptr<byte_link>>
offer_shared_link(link_socket& tcp, caf::timespan timeout, std::string& note) {
  auto boot = host_boot_id();
  if (boot.empty() || boot.size() > max_shared_text) {
    note = "this host's boot id is unreadable";
    return std::shared_ptr<byte_link>{};
  }
  data_frame offer;
  offer.op = data_frame::shared_offer;
  offer.id = 1;
  if (!write_text_frame(tcp, offer, boot))
    return make_error(errc::node_unreachable, "the connection broke");
  data_frame answer;
  if (!tcp.read_exact(&answer, sizeof(answer)))
    return make_error(errc::node_unreachable, "the connection broke");
  if (auto bad = check_frame(answer, false);
      !bad.empty() || answer.op != data_frame::shared_answer)
    return make_error(
      errc::node_unreachable,
      "the shard node answered the shared-memory offer with "
        + (bad.empty() ? "operation " + std::to_string(answer.op) : bad));
  std::string text(answer.count, '\0');
  if (!tcp.read_exact(text.data(), text.size()))
    return make_error(errc::node_unreachable, "the connection broke");
  if (answer.flag == 0) {
    note = text;
    return std::shared_ptr<byte_link>{};
  }
  auto cut = text.find('\n');
  if (cut == std::string::npos || cut == 0 || cut + 1 == text.size()
      || cut >= sizeof(sockaddr_un::sun_path) - 1) {
    note = "the shard node's answer names no socket";
    return std::shared_ptr<byte_link>{};
  }
  auto name = text.substr(0, cut), token = text.substr(cut + 1);
  // From here on a failure leaves both sides on TCP: the server sees this
  // socket close, or this side's next frame on TCP.
  owned_fd sock{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  socklen_t len = 0;
  auto addr = abstract_address(name, len);
  if (sock.fd < 0
      || ::connect(sock.fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    note = "cannot reach the shard node's socket (another network "
           "namespace?): "
           + std::string{std::strerror(errno)};
    return std::shared_ptr<byte_link>{};
  }
  auto deadline = clock_type::now()
                  + std::min<clock_type::duration>(timeout, hand_over_time);
  shared_fds fds;
  if (::send(sock.fd, token.data(), token.size(), MSG_NOSIGNAL)
        != static_cast<ssize_t>(token.size())
      || !receive_fds(sock.fd, fds, deadline)) {
    note = "the shard node did not hand over the segment";
    return std::shared_ptr<byte_link>{};
  }
  auto link = shared_link::open(fds, false, tcp.peer());
  if (!link) {
    send_byte(sock.fd, 'n');
    note = describe(link.error());
    return std::shared_ptr<byte_link>{};
  }
  if (!send_byte(sock.fd, 'y')) {
    note = "the shard node left the hand-over";
    return std::shared_ptr<byte_link>{};
  }
  (*link)->take_peer_socket(sock.release());
  return std::shared_ptr<byte_link>{std::move(*link)};
}

caf::expected<std::shared_ptr<byte_link>>
answer_shared_link(link_socket& tcp, const data_frame& offer, bool allowed) {
  std::string boot(offer.count, '\0');
  if (!tcp.read_exact(boot.data(), boot.size()))
    return make_error(errc::node_unreachable, "the connection broke");
  data_frame answer;
  answer.op = data_frame::shared_answer;
  answer.id = offer.id;
  auto refuse =
    [&](const std::string& why) -> caf::expected<std::shared_ptr<byte_link>> {
    answer.flag = 0;
    if (!write_text_frame(tcp, answer, why))
      return make_error(errc::node_unreachable, "the connection broke");
    return std::shared_ptr<byte_link>{};
  };
  if (!allowed)
    return refuse("shared memory is turned off on the shard node");
  if (boot != host_boot_id())
    return refuse("another host");
  auto fds = shared_link::make_segment(shared_link::default_ring_bytes);
  if (!fds)
    return refuse(describe(fds.error()));
  auto token = random_hex(32);
  auto name = "troupe-data-" + std::to_string(::getpid()) + "-" + random_hex(8);
  owned_fd listener{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  socklen_t len = 0;
  auto addr = abstract_address(name, len);
  if (token.empty() || listener.fd < 0
      || ::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), len) != 0
      || ::listen(listener.fd, 4) != 0)
    return refuse("cannot listen on a Unix socket: "
                  + std::string{std::strerror(errno)});
  answer.flag = 1;
  if (!write_text_frame(tcp, answer, name + "\n" + token))
    return make_error(errc::node_unreachable, "the connection broke");
  auto deadline = clock_type::now() + hand_over_time;
  while (clock_type::now() < deadline) {
    pollfd p[2] = {{listener.fd, POLLIN, 0}, {tcp.fd(), POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - clock_type::now());
    auto rc = ::poll(p, 2,
                     static_cast<int>(std::max<int64_t>(1, left.count())));
    if (rc < 0 && errno == EINTR)
      continue;
    // A client that fell back speaks on TCP, or has gone: either way its
    // next bytes are read there.
    if (rc < 0 || p[1].revents != 0)
      return std::shared_ptr<byte_link>{};
    if (rc == 0 || p[0].revents == 0)
      continue;
    owned_fd peer{
      ::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)};
    if (peer.fd < 0)
      continue;
    std::string got(token.size(), '\0');
    if (!read_within(peer.fd, got.data(), got.size(),
                     std::min(deadline, clock_type::now() + hand_over_time)))
      continue;
    unsigned char diff = 0;
    for (size_t i = 0; i < token.size(); ++i)
      diff |= static_cast<unsigned char>(got[i] ^ token[i]);
    if (diff != 0)
      continue; // a stranger on this host: the client may still come
    char verdict = 0;
    if (!send_fds(peer.fd, *fds) || !read_within(peer.fd, &verdict, 1, deadline)
        || verdict != 'y')
      return std::shared_ptr<byte_link>{};
    auto link = shared_link::open(*fds, true, tcp.peer());
    if (!link)
      return make_error(errc::node_unreachable,
                        "the client took a shared link this node cannot "
                        "open: "
                          + describe(link.error()));
    (*link)->take_peer_socket(peer.release());
    return std::shared_ptr<byte_link>{std::move(*link)};
  }
  return std::shared_ptr<byte_link>{};
}

} // namespace troupe
