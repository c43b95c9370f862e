#include "actors/data_link.hpp"

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "actors/remote.hpp"
#include "runtime/errc.hpp"

namespace troupe {

std::string check_frame(const data_frame& f, bool from_client) {
  if (f.magic != data_frame::magic_value)
    return "not a troupe data-plane frame (bad magic)";
  bool request = f.op == data_frame::pull || f.op == data_frame::push;
  bool reply = f.op == data_frame::values || f.op == data_frame::ack
               || f.op == data_frame::error;
  if (from_client ? !request : !reply)
    return "unexpected operation " + std::to_string(f.op);
  bool floats = f.op == data_frame::push || f.op == data_frame::values;
  if (floats && f.count > max_frame_floats)
    return "announces " + std::to_string(f.count) + " floats (at most "
           + std::to_string(max_frame_floats) + ")";
  if (f.op == data_frame::error && f.count > max_error_text)
    return "announces " + std::to_string(f.count) + " bytes of error text";
  if (!floats && f.op != data_frame::error && f.count != 0)
    return "a frame without payload announces " + std::to_string(f.count);
  if (f.shard < 0)
    return "negative shard " + std::to_string(f.shard);
  return {};
}

namespace {

// -- sockets --------------------------------------------------------------------

bool read_exact(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    auto got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

/// How far a write got.
enum class written { all, some, failed };

/// Writes header and payload from byte `done` on (of the two together),
/// with one system call where the kernel takes them at once; MSG_NOSIGNAL,
/// so a closed peer is an error, not SIGPIPE. With `wait` false it stops
/// when the socket's buffer is full (written::some, `done` says how far):
/// an actor must never wait for a peer that does not read.
written write_all(int fd, const void* head, size_t head_len, const void* body,
                  size_t body_len, size_t& done, bool wait) {
  auto total = head_len + body_len;
  while (done < total) {
    iovec iov[2];
    int count = 0;
    if (done < head_len)
      iov[count++] = {static_cast<char*>(const_cast<void*>(head)) + done,
                      head_len - done};
    if (body_len > 0) {
      auto from = done > head_len ? done - head_len : 0;
      iov[count++] = {static_cast<char*>(const_cast<void*>(body)) + from,
                      body_len - from};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    auto sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent < 0 && !wait && (errno == EAGAIN || errno == EWOULDBLOCK))
      return written::some;
    if (sent <= 0)
      return written::failed;
    done += static_cast<size_t>(sent);
  }
  return written::all;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string peer_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    if (a.ss_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
      port = ntohs(v6->sin6_port);
    }
  }
  return std::string{host} + ":" + std::to_string(port);
}

/// A connected socket to host:port within `timeout`, or -1 and `why`.
int connect_within(const std::string& host, uint16_t port,
                   caf::timespan timeout, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    why = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
      rc = ::poll(&p, 1, static_cast<int>(ms.count())) == 1 ? 0 : -1;
      int err = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof(err);
      if (rc == 0)
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      errno = err;
      rc = err == 0 ? 0 : -1;
    }
    if (rc != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    no_delay(fd);
  }
  return fd;
}

// -- writing frames -------------------------------------------------------------

/// A frame to send; the payload stays alive through `keep` until written.
struct outgoing {
  data_frame head;
  std::shared_ptr<const std::vector<float>> keep;
  const float* data = nullptr;
  std::string text;
  size_t done = 0; ///< bytes of header and payload written so far
};

/// Writes (the rest of) one frame; see write_all.
written write_frame(int fd, outgoing& o, bool wait) {
  if (!o.text.empty())
    return write_all(fd, &o.head, sizeof(o.head), o.text.data(),
                     o.text.size(), o.done, wait);
  auto body = o.head.op == data_frame::error ? 0
                                             : o.head.count * sizeof(float);
  return write_all(fd, &o.head, sizeof(o.head), o.data, body, o.done, wait);
}

/// A queue of frames and the thread that writes them, in order, to one
/// socket. Frames posted before start() wait for it. A small frame posted
/// while nothing is queued or being written is written at once by the
/// caller, as far as the socket takes it without waiting: a request or an
/// ack then costs no thread hand-off (it is what keeps a 40 KB round trip
/// as fast as on CAF's own connection), and an actor never waits for a
/// peer that does not read; the thread writes the rest, and every large
/// frame.
class frame_writer {
public:
  static constexpr size_t inline_bytes = 64 * 1024;

  ~frame_writer() { stop(); }

  /// Called (without the writer's lock) after every frame written in full
  /// and when the socket fails: a server session counts its replies out.
  void on_progress(std::function<void()> f) { progress_ = std::move(f); }

  bool failed() {
    std::lock_guard<std::mutex> guard{mtx_};
    return broken_;
  }

  /// False once the socket has failed or the writer stopped.
  bool post(outgoing o) {
    std::unique_lock<std::mutex> guard{mtx_};
    if (broken_ || stopping_)
      return false;
    auto bytes = o.text.size() + (o.data ? o.head.count * sizeof(float) : 0);
    if (fd_ >= 0 && !busy_ && queue_.empty() && bytes <= inline_bytes) {
      busy_ = true;
      guard.unlock();
      auto result = write_frame(fd_, o, false);
      guard.lock();
      busy_ = false;
      if (result == written::failed)
        fail();
      else if (result == written::some) // the thread writes the rest first
        queue_.push_front(std::move(o));
      cv_.notify_one();
      guard.unlock();
      if (result != written::some && progress_)
        progress_();
      return result != written::failed;
    }
    queue_.push_back(std::move(o));
    cv_.notify_one();
    return true;
  }

  void start(int fd) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      fd_ = fd;
    }
    thread_ = std::thread([this] { run(); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable())
      thread_.join();
  }

private:
  /// The socket failed: drop what is queued; the reader then sees the
  /// broken connection and ends the session. Called under the lock.
  void fail() {
    broken_ = true;
    queue_.clear();
    ::shutdown(fd_, SHUT_RDWR);
  }

  void run() {
    for (;;) {
      outgoing o;
      {
        std::unique_lock<std::mutex> guard{mtx_};
        cv_.wait(guard, [&] {
          return stopping_ || broken_ || (!queue_.empty() && !busy_);
        });
        if (queue_.empty() || broken_)
          return;
        o = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      bool ok = write_frame(fd_, o, true) == written::all;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        busy_ = false;
        if (!ok)
          fail();
      }
      if (progress_)
        progress_();
      if (!ok)
        return;
    }
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<outgoing> queue_;
  int fd_ = -1;
  bool busy_ = false; ///< a frame is being written
  std::function<void()> progress_;
  bool stopping_ = false;
  bool broken_ = false;
  std::thread thread_;
};

outgoing error_frame(uint64_t id, int32_t shard, const caf::error& err) {
  outgoing o;
  o.head.op = data_frame::error;
  o.head.id = id;
  o.head.shard = shard;
  o.head.flag = err.category() == caf::atom("troupe") ? err.code() : 0;
  o.text = describe(err);
  o.head.count = o.text.size();
  return o;
}

// -- the server -------------------------------------------------------------------

/// The shards a server answers for, and their sizes.
class shard_registry {
public:
  void put(int32_t id, shard_actor h, uint64_t size) {
    std::lock_guard<std::mutex> guard{mtx_};
    shards_[id] = {std::move(h), size};
  }
  shard_actor get(int32_t id) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = shards_.find(id);
    return it == shards_.end() ? shard_actor{} : it->second.first;
  }
  /// The size of shard `id`; 0 when there is no such shard.
  uint64_t size(int32_t id) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = shards_.find(id);
    return it == shards_.end() ? 0 : it->second.second;
  }

private:
  std::mutex mtx_;
  std::map<int32_t, std::pair<shard_actor, uint64_t>> shards_;
};

struct relay_context {
  std::shared_ptr<frame_writer> writer;
  std::shared_ptr<shard_registry> shards;
  caf::timespan timeout;
};

/// One connection's requests, made to the local shard actors in the order
/// they arrived; each reply goes to the writer as it comes.
caf::behavior relay_impl(caf::event_based_actor* self,
                         std::shared_ptr<relay_context> ctx) {
  auto missing = [=](uint64_t id, int32_t shard) {
    ctx->writer->post(error_frame(
      id, shard,
      make_error(errc::invalid_argument,
                 "no shard " + std::to_string(shard) + " on this node")));
  };
  return {
    [=](pull_atom, uint64_t id, int32_t shard, int32_t worker,
        int64_t min_version) {
      auto h = ctx->shards->get(shard);
      if (!h)
        return missing(id, shard);
      self->request(h, ctx->timeout, pull_atom_v, worker, min_version)
        .then(
          [=](float_block& b) {
            outgoing o;
            o.head.op = data_frame::values;
            o.head.id = id;
            o.head.shard = shard;
            o.head.tag = b.version;
            o.head.count = b.values ? b.values->size() : 0;
            o.data = b.values ? b.values->data() : nullptr;
            o.keep = std::move(b.values);
            ctx->writer->post(std::move(o));
          },
          [=](caf::error& err) {
            ctx->writer->post(error_frame(id, shard, err));
          });
    },
    [=](push_atom, uint64_t id, gradient_push& g) {
      auto shard = g.shard;
      auto h = ctx->shards->get(shard);
      if (!h)
        return missing(id, shard);
      self->request(h, ctx->timeout, push_atom_v, std::move(g))
        .then(
          [=](push_ack& a) {
            outgoing o;
            o.head.op = data_frame::ack;
            o.head.id = id;
            o.head.shard = shard;
            o.head.tag = a.version;
            o.head.flag = a.stale ? 1 : 0;
            ctx->writer->post(std::move(o));
          },
          [=](caf::error& err) {
            ctx->writer->post(error_frame(id, shard, err));
          });
    },
  };
}

/// How many requests of one connection are read but not yet answered on
/// the wire. Shared by the session's reader and its writer's callback,
/// which the relay may still call after the session is gone.
struct request_gate {
  /// At most this many: beyond it the reader stops reading, so a peer that
  /// sends requests and reads no replies fills its own socket, not the
  /// shards' mailboxes (a worker has a few open at a time).
  static constexpr size_t max_open = 64;

  std::mutex mtx;
  std::condition_variable cv;
  size_t open = 0;      ///< requests without a reply written
  bool closing = false; ///< the server stops

  /// Waits until another request may be read; false when the session
  /// ends instead.
  bool admit(frame_writer& writer) {
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait(guard, [&] {
      return open < max_open || closing || writer.failed();
    });
    if (closing || writer.failed())
      return false;
    ++open;
    return true;
  }

  /// A reply is out (or the socket failed).
  void answered() {
    std::lock_guard<std::mutex> guard{mtx};
    if (open > 0)
      --open;
    cv.notify_one();
  }

  void close() {
    std::lock_guard<std::mutex> guard{mtx};
    closing = true;
    cv.notify_one();
  }
};

/// One accepted connection: its reader thread, writer and relay actor.
struct session {
  std::shared_ptr<shard_registry> shards;
  int fd = -1;
  std::shared_ptr<frame_writer> writer = std::make_shared<frame_writer>();
  std::shared_ptr<request_gate> gate = std::make_shared<request_gate>();
  caf::actor relay;
  std::thread reader;
  std::atomic<bool> done{false};
};

/// Reads requests until the connection ends or sends a bad frame.
void serve_connection(session& s) {
  for (;;) {
    data_frame f;
    if (!read_exact(s.fd, &f, sizeof(f)))
      break;
    if (auto why = check_frame(f, true); !why.empty()) {
      std::cerr << "troupe: data plane: closing the connection from "
                << peer_of(s.fd) << ": " << why << std::endl;
      break;
    }
    if (!s.gate->admit(*s.writer))
      break;
    if (f.op == data_frame::pull) {
      caf::anon_send(s.relay, pull_atom_v, f.id, f.shard, f.worker, f.tag);
      continue;
    }
    // No push is larger than its shard: memory is only spent on what a
    // legitimate peer may send.
    if (auto size = s.shards->size(f.shard); f.count > size) {
      std::cerr << "troupe: data plane: closing the connection from "
                << peer_of(s.fd) << ": a push of " << f.count
                << " floats for shard " << f.shard << ", which holds "
                << size << std::endl;
      break;
    }
    auto values = pooled_floats(f.count);
    if (!read_exact(s.fd, values->data(), f.count * sizeof(float)))
      break;
    gradient_push g;
    g.shard = f.shard;
    g.worker = f.worker;
    g.tag = f.tag;
    g.size = f.count;
    g.buffer = std::move(values);
    caf::anon_send(s.relay, push_atom_v, f.id, std::move(g));
  }
  ::shutdown(s.fd, SHUT_RDWR);
  s.writer->stop();
  caf::anon_send_exit(s.relay, caf::exit_reason::user_shutdown);
  s.done = true;
}

} // namespace

class data_server_impl {
public:
  data_server_impl(caf::actor_system& sys, int fd, uint16_t port,
                   caf::timespan timeout)
    : sys_(sys), listen_fd_(fd), port_(port), timeout_(timeout) {
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  uint16_t port() const { return port_; }

  void serve(int32_t id, shard_actor h, uint64_t size) {
    shards_->put(id, std::move(h), size);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopped_)
        return;
      stopped_ = true;
    }
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (acceptor_.joinable())
      acceptor_.join();
    ::close(listen_fd_);
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& s : sessions_) {
      s->gate->close();
      ::shutdown(s->fd, SHUT_RDWR);
    }
    for (auto& s : sessions_)
      finish(*s);
    sessions_.clear();
  }

private:
  static void finish(session& s) {
    if (s.reader.joinable())
      s.reader.join();
    ::close(s.fd);
  }

  void accept_loop() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED)
          continue;
        return; // the listener was shut down
      }
      no_delay(fd);
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopped_) {
        ::close(fd);
        return;
      }
      // Sessions whose peer has gone are joined here, so a node that sees
      // many reconnects keeps a bounded list.
      sessions_.remove_if([](const std::unique_ptr<session>& s) {
        if (!s->done)
          return false;
        finish(*s);
        return true;
      });
      // Each session may hold a shard-sized buffer: their number is
      // bounded (one per worker node is what a cluster needs).
      if (sessions_.size() >= max_sessions) {
        std::cerr << "troupe: data plane: refusing the connection from "
                  << peer_of(fd) << ": " << max_sessions
                  << " connections are open" << std::endl;
        ::close(fd);
        continue;
      }
      auto s = std::make_unique<session>();
      s->shards = shards_;
      s->fd = fd;
      auto ctx = std::make_shared<relay_context>();
      ctx->writer = s->writer;
      ctx->shards = shards_;
      ctx->timeout = timeout_;
      s->relay = sys_.spawn(relay_impl, ctx);
      s->writer->on_progress([gate = s->gate] { gate->answered(); });
      s->writer->start(fd);
      auto* raw = s.get();
      s->reader = std::thread([raw] { serve_connection(*raw); });
      sessions_.push_back(std::move(s));
    }
  }

  static constexpr size_t max_sessions = 256;

  caf::actor_system& sys_;
  int listen_fd_;
  uint16_t port_;
  caf::timespan timeout_;
  std::shared_ptr<shard_registry> shards_ = std::make_shared<shard_registry>();
  std::thread acceptor_;
  std::mutex mtx_;
  std::list<std::unique_ptr<session>> sessions_;
  bool stopped_ = false;
};

caf::expected<std::shared_ptr<data_server>>
data_server::start(caf::actor_system& sys, const std::string& host,
                   caf::timespan timeout) {
  auto bind_host = bind_address(host);
  auto fail = [&](const std::string& why) {
    return make_error(errc::node_unreachable,
                      "cannot listen for the data plane on " + host + ": "
                        + why);
  };
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(bind_host.c_str(), "0", &hints, &found); rc != 0)
    return fail(::gai_strerror(rc));
  int fd = -1;
  std::string why = "no address";
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0)
    return fail(why);
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  uint16_t port = a.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return std::make_shared<data_server>(
    std::make_unique<data_server_impl>(sys, fd, port, timeout));
}

data_server::data_server(std::unique_ptr<data_server_impl> impl)
  : impl_(std::move(impl)) {
}

data_server::~data_server() {
  stop();
}

uint16_t data_server::port() const {
  return impl_->port();
}

void data_server::serve(int32_t id, shard_actor handle, uint64_t size) {
  impl_->serve(id, std::move(handle), size);
}

void data_server::stop() {
  impl_->stop();
}

// -- the client -------------------------------------------------------------------

class data_client_impl {
public:
  data_client_impl(caf::actor_system& sys, std::string host, uint16_t port,
                   caf::timespan timeout)
    : sys_(sys), host_(std::move(host)), port_(port), timeout_(timeout) {
  }

  void begin() {
    reader_ = std::thread([this] { run(); });
  }

  std::string address() const { return host_ + ":" + std::to_string(port_); }

  caf::actor_system& system() { return sys_; }

  uint64_t next_id() { return next_id_++; }

  /// Sends a request whose reply goes to `stub`; false (and the stub
  /// fails it) when the connection is gone.
  bool send(outgoing o, const caf::actor& stub) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (broken_)
      return false;
    auto id = o.head.id;
    waiting_[id] = {stub, o.head.op};
    if (!writer_->post(std::move(o))) {
      waiting_.erase(id);
      return false;
    }
    return true;
  }

  caf::error broken_reason() {
    std::lock_guard<std::mutex> guard{mtx_};
    return link_error(why_.empty() ? "the connection is closed" : why_);
  }

  void add_stub(caf::actor stub, int32_t shard, uint64_t size) {
    std::lock_guard<std::mutex> guard{mtx_};
    stubs_.push_back(std::move(stub));
    sizes_[shard] = size;
  }

  bool connected() {
    std::lock_guard<std::mutex> guard{mtx_};
    return up_ && !broken_;
  }

  bool failed() {
    std::lock_guard<std::mutex> guard{mtx_};
    return broken_;
  }

  void close() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (closed_)
        return;
      closed_ = true;
      if (fd_ >= 0)
        ::shutdown(fd_, SHUT_RDWR);
    }
    if (reader_.joinable())
      reader_.join();
    writer_->stop();
    std::lock_guard<std::mutex> guard{mtx_};
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
    for (auto& s : stubs_)
      caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    stubs_.clear();
  }

  caf::error link_error(const std::string& why) const {
    return make_error(errc::node_unreachable,
                      "data plane to " + address() + ": " + why);
  }

private:
  void run() {
    std::string why;
    int fd = connect_within(host_, port_, timeout_, why);
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (fd >= 0 && closed_) {
        ::close(fd);
        fd = -1;
        why = "closed";
      }
      fd_ = fd;
      up_ = fd >= 0;
    }
    if (fd < 0)
      return fail_all("cannot connect: " + why);
    writer_->start(fd);
    for (;;) {
      data_frame f;
      if (!read_exact(fd, &f, sizeof(f)))
        return fail_all("the connection broke");
      if (auto bad = check_frame(f, false); !bad.empty())
        return fail_all("bad frame from the shard node: " + bad);
      auto [stub, asked] = take_waiting(f.id);
      // A reply answers its kind of request (an error answers either).
      if ((f.op == data_frame::values && asked == data_frame::push)
          || (f.op == data_frame::ack && asked == data_frame::pull))
        return fail_all("bad frame from the shard node: a reply of the "
                        "wrong kind to request "
                        + std::to_string(f.id));
      if (f.op == data_frame::values) {
        // Values of the shard's size, or none with "ask again" (version -1).
        if (auto size = size_of(f.shard);
            f.count != size && !(f.count == 0 && f.tag < 0))
          return fail_all("bad frame from the shard node: "
                          + std::to_string(f.count) + " values for shard "
                          + std::to_string(f.shard) + ", which holds "
                          + std::to_string(size));
        auto values = pooled_floats(f.count);
        if (!read_exact(fd, values->data(), f.count * sizeof(float)))
          return fail_all("the connection broke");
        if (stub)
          caf::anon_send(stub, data_atom_v, f.id,
                         float_block{f.shard, f.tag, std::move(values)});
      } else if (f.op == data_frame::ack) {
        if (stub)
          caf::anon_send(stub, data_atom_v, f.id,
                         push_ack{f.tag, f.flag != 0});
      } else {
        std::string text(f.count, '\0');
        if (!read_exact(fd, text.data(), text.size()))
          return fail_all("the connection broke");
        auto err = f.flag > 0
                     ? make_error(static_cast<errc>(f.flag), text)
                     : make_error(errc::actor_down, text);
        if (stub)
          caf::anon_send(stub, data_atom_v, f.id, std::move(err));
      }
    }
  }

  uint64_t size_of(int32_t shard) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = sizes_.find(shard);
    return it == sizes_.end() ? 0 : it->second;
  }

  /// The stub waiting for request `id` and the request's operation (0
  /// when nobody waits for it).
  std::pair<caf::actor, uint8_t> take_waiting(uint64_t id) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = waiting_.find(id);
    if (it == waiting_.end())
      return {};
    auto out = std::move(it->second);
    waiting_.erase(it);
    return out;
  }

  /// The connection is gone: every stub fails what it has open and
  /// everything it is asked from now on.
  void fail_all(const std::string& why) {
    std::lock_guard<std::mutex> guard{mtx_};
    broken_ = true;
    why_ = why;
    waiting_.clear();
    auto err = link_error(why);
    for (auto& s : stubs_)
      caf::anon_send(s, data_atom_v, err);
  }

  caf::actor_system& sys_;
  std::string host_;
  uint16_t port_;
  caf::timespan timeout_;
  std::thread reader_;
  std::shared_ptr<frame_writer> writer_ = std::make_shared<frame_writer>();
  std::atomic<uint64_t> next_id_{1};
  std::mutex mtx_;
  int fd_ = -1;
  bool up_ = false, broken_ = false, closed_ = false;
  std::string why_;
  std::map<uint64_t, std::pair<caf::actor, uint8_t>> waiting_;
  std::vector<caf::actor> stubs_;
  std::map<int32_t, uint64_t> sizes_; ///< floats per shard, from the stubs
};

namespace {

struct stub_state {
  static inline const char* name = "shard_stub";
  std::map<uint64_t, caf::response_promise> open;
  caf::error broken;
};

/// Stands for a remote shard: pull and push go over the data link.
caf::behavior stub_impl(caf::stateful_actor<stub_state>* self,
                        std::shared_ptr<data_client_impl> link,
                        int32_t shard) {
  auto request = [=](outgoing o) -> caf::response_promise {
    auto rp = self->make_response_promise();
    if (self->state.broken) {
      rp.deliver(self->state.broken);
      return rp;
    }
    auto id = link->next_id();
    o.head.id = id;
    o.head.shard = shard;
    self->state.open.emplace(id, rp);
    if (!link->send(std::move(o), caf::actor_cast<caf::actor>(self))) {
      self->state.open.erase(id);
      rp.deliver(link->broken_reason());
    }
    return rp;
  };
  auto answer = [=](uint64_t id, auto&& value) {
    auto it = self->state.open.find(id);
    if (it == self->state.open.end())
      return;
    it->second.deliver(std::forward<decltype(value)>(value));
    self->state.open.erase(it);
  };
  return {
    [=](pull_atom, int32_t worker, int64_t min_version) {
      outgoing o;
      o.head.op = data_frame::pull;
      o.head.worker = worker;
      o.head.tag = min_version;
      return request(std::move(o));
    },
    [=](push_atom, gradient_push& g) {
      outgoing o;
      o.head.op = data_frame::push;
      o.head.worker = g.worker;
      o.head.tag = g.tag;
      o.head.count = g.size;
      o.data = g.data();
      o.keep = std::move(g.buffer);
      return request(std::move(o));
    },
    [=](data_atom, uint64_t id, float_block& b) { answer(id, std::move(b)); },
    [=](data_atom, uint64_t id, push_ack& a) { answer(id, a); },
    [=](data_atom, uint64_t id, caf::error& err) { answer(id, std::move(err)); },
    [=](data_atom, caf::error& err) {
      self->state.broken = err;
      for (auto& [id, rp] : self->state.open)
        rp.deliver(err);
      self->state.open.clear();
    },
  };
}

} // namespace

std::shared_ptr<data_client> data_client::open(caf::actor_system& sys,
                                               const std::string& host,
                                               uint16_t port,
                                               caf::timespan timeout) {
  auto impl = std::make_shared<data_client_impl>(sys, host, port, timeout);
  impl->begin();
  return std::make_shared<data_client>(std::move(impl));
}

data_client::data_client(std::shared_ptr<data_client_impl> impl)
  : impl_(std::move(impl)) {
}

data_client::~data_client() {
  close();
}

shard_actor data_client::stub(int32_t shard, uint64_t size) {
  // The stub keeps the connection's state alive for as long as it runs.
  auto h = impl_->system().spawn(stub_impl, impl_, shard);
  impl_->add_stub(h, shard, size);
  return caf::actor_cast<shard_actor>(h);
}

bool data_client::connected() const {
  return impl_->connected();
}

bool data_client::failed() const {
  return impl_->failed();
}

void data_client::close() {
  impl_->close();
}

} // namespace troupe
