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

#include "actors/link_socket.hpp"
#include "actors/remote.hpp"
#include "actors/sockets.hpp"
#include "actors/tls_front_door.hpp"
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

// -- writing frames -------------------------------------------------------------

/// A frame to send; the payload stays alive through `keep` until written.
struct outgoing {
  data_frame head;
  std::shared_ptr<const std::vector<float>> keep;
  const float* data = nullptr;
  std::string text;
  size_t done = 0; ///< bytes of header and payload written so far
};

/// Writes (the rest of) one frame; see link_socket::write.
written write_frame(link_socket& sock, outgoing& o, bool wait) {
  if (!o.text.empty())
    return sock.write(&o.head, sizeof(o.head), o.text.data(), o.text.size(),
                      o.done, wait);
  auto body = o.head.op == data_frame::error ? 0
                                             : o.head.count * sizeof(float);
  return sock.write(&o.head, sizeof(o.head), o.data, body, o.done, wait);
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
    if (sock_ && !busy_ && queue_.empty() && bytes <= inline_bytes) {
      busy_ = true;
      guard.unlock();
      auto result = write_frame(*sock_, o, false);
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

  void start(std::shared_ptr<link_socket> sock) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      sock_ = std::move(sock);
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
    sock_->shutdown();
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
      bool ok = write_frame(*sock_, o, true) == written::all;
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
  std::shared_ptr<link_socket> sock_;
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
  std::shared_ptr<link_socket> sock;
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
    if (!s.sock->read_exact(&f, sizeof(f)))
      break;
    if (auto why = check_frame(f, true); !why.empty()) {
      std::cerr << "troupe: data plane: closing the connection from "
                << s.sock->peer() << ": " << why << std::endl;
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
                << s.sock->peer() << ": a push of " << f.count
                << " floats for shard " << f.shard << ", which holds "
                << size << std::endl;
      break;
    }
    auto values = pooled_floats(f.count);
    if (!s.sock->read_exact(values->data(), f.count * sizeof(float)))
      break;
    gradient_push g;
    g.shard = f.shard;
    g.worker = f.worker;
    g.tag = f.tag;
    g.batch = f.batch;
    g.size = f.count;
    g.buffer = std::move(values);
    caf::anon_send(s.relay, push_atom_v, f.id, std::move(g));
  }
  s.sock->shutdown();
  s.writer->stop();
  caf::anon_send_exit(s.relay, caf::exit_reason::user_shutdown);
  s.done = true;
}

} // namespace

class data_server_impl {
public:
  /// Serves listening socket `fd`: behind a TLS front door when `tls` is
  /// set, else with a plain accept loop.
  data_server_impl(caf::actor_system& sys, int fd,
                   std::shared_ptr<const tls_context> tls,
                   caf::timespan timeout)
    : sys_(sys), listen_fd_(fd), port_(local_port_of(fd)), timeout_(timeout) {
    if (tls)
      door_ = std::make_unique<tls_front_door>(
        fd, std::move(tls),
        [this](int peer, ssl_ptr ssl) { admit(peer, std::move(ssl)); },
        "data plane", true);
    else
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
    if (door_) {
      door_->stop(); // closes the listener
    } else {
      ::shutdown(listen_fd_, SHUT_RDWR);
      if (acceptor_.joinable())
        acceptor_.join();
      ::close(listen_fd_);
    }
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& s : sessions_) {
      s->gate->close();
      s->sock->shutdown();
    }
    for (auto& s : sessions_)
      finish(*s);
    sessions_.clear();
  }

private:
  static void finish(session& s) {
    if (s.reader.joinable())
      s.reader.join();
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
      admit(fd, nullptr);
    }
  }

  /// Starts a session on a new connection (authenticated already when
  /// TLS is on).
  void admit(int fd, ssl_ptr ssl) {
    auto sock = std::make_shared<link_socket>(fd, std::move(ssl));
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopped_)
      return;
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
                << sock->peer() << ": " << max_sessions
                << " connections are open" << std::endl;
      return;
    }
    auto s = std::make_unique<session>();
    s->shards = shards_;
    s->sock = sock;
    auto ctx = std::make_shared<relay_context>();
    ctx->writer = s->writer;
    ctx->shards = shards_;
    ctx->timeout = timeout_;
    s->relay = sys_.spawn(relay_impl, ctx);
    s->writer->on_progress([gate = s->gate] { gate->answered(); });
    s->writer->start(sock);
    auto* raw = s.get();
    s->reader = std::thread([raw] { serve_connection(*raw); });
    sessions_.push_back(std::move(s));
  }

  static constexpr size_t max_sessions = 256;

  caf::actor_system& sys_;
  int listen_fd_;
  uint16_t port_;
  caf::timespan timeout_;
  std::shared_ptr<shard_registry> shards_ = std::make_shared<shard_registry>();
  std::unique_ptr<tls_front_door> door_;
  std::thread acceptor_;
  std::mutex mtx_;
  std::list<std::unique_ptr<session>> sessions_;
  bool stopped_ = false;
};

caf::expected<std::shared_ptr<data_server>>
data_server::start(caf::actor_system& sys, const std::string& host,
                   caf::timespan timeout) {
  auto sec = security_of(sys);
  if (auto err = sec->may_listen(host, "the data plane"))
    return err;
  auto fd = listen_on(host, 0, false);
  if (!fd)
    return make_error(errc::node_unreachable,
                      "cannot listen for the data plane on " + host + ": "
                        + describe(fd.error()));
  return std::make_shared<data_server>(
    std::make_unique<data_server_impl>(sys, *fd, sec->tls, timeout));
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
                   caf::timespan timeout,
                   std::shared_ptr<const tls_context> tls)
    : sys_(sys),
      host_(std::move(host)),
      port_(port),
      timeout_(timeout),
      tls_(std::move(tls)) {
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
      if (sock_)
        sock_->shutdown();
      else if (fd_ >= 0) // connecting, or in the handshake
        ::shutdown(fd_, SHUT_RDWR);
    }
    if (reader_.joinable())
      reader_.join();
    writer_->stop();
    std::lock_guard<std::mutex> guard{mtx_};
    sock_.reset();
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
      fd_ = fd; // close() now shuts it down, ending a handshake too
    }
    if (fd < 0)
      return fail_all("cannot connect: " + why);
    ssl_ptr ssl;
    if (tls_) {
      set_nonblocking(fd, true);
      ssl = tls_->session(fd, false, true);
      why = ssl ? finish_handshake(ssl.get(), fd,
                                   std::chrono::steady_clock::now()
                                     + tls_->handshake_timeout)
                : "cannot create a TLS session";
      if (!why.empty()) {
        {
          std::lock_guard<std::mutex> guard{mtx_};
          fd_ = -1;
          ::close(fd);
        }
        return fail_all("TLS handshake failed: " + why);
      }
    }
    auto sock = std::make_shared<link_socket>(fd, std::move(ssl));
    {
      std::lock_guard<std::mutex> guard{mtx_};
      sock_ = sock;
      up_ = true;
    }
    writer_->start(sock);
    for (;;) {
      data_frame f;
      if (!sock->read_exact(&f, sizeof(f)))
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
        if (!sock->read_exact(values->data(), f.count * sizeof(float)))
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
        if (!sock->read_exact(text.data(), text.size()))
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
  std::shared_ptr<const tls_context> tls_;
  std::thread reader_;
  std::shared_ptr<frame_writer> writer_ = std::make_shared<frame_writer>();
  std::atomic<uint64_t> next_id_{1};
  std::mutex mtx_;
  int fd_ = -1; ///< until sock_ takes it over
  std::shared_ptr<link_socket> sock_;
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
      o.head.batch = g.batch;
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
  auto impl = std::make_shared<data_client_impl>(sys, host, port, timeout,
                                                 security_of(sys)->tls);
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
