// The shard node's end of the data plane (actors/data_plane/data_link.hpp): the
// listener behind the front door, one session per connection, and the
// reply sinks through which the local shard actors answer it.
#include "actors/data_plane/data_link.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "caf/actor_companion.hpp"

#include "actors/net/link_socket.hpp"
#include "actors/net/remote.hpp"
#include "actors/net/sockets.hpp"
#include "actors/net/front_door.hpp"
#include "runtime/base/errc.hpp"
#include "actors/data_plane/data_frames.hpp"
#include "actors/data_plane/shared_upgrade.hpp"

namespace troupe {

using namespace data_wire;

std::string check_frame(const data_frame& f, bool from_client) {
  if (f.magic != data_frame::magic_value)
    return "not a troupe data-plane frame (bad magic)";
  bool request = f.op == data_frame::pull || f.op == data_frame::push
                 || f.op == data_frame::row_pull || f.op == data_frame::row_push
                 || f.op == data_frame::replica || f.op == data_frame::row_pulls
                 || f.op == data_frame::row_pushes
                 || f.op == data_frame::shared_offer;
  bool reply = f.op == data_frame::values || f.op == data_frame::ack
               || f.op == data_frame::error || f.op == data_frame::rows
               || f.op == data_frame::shared_answer;
  if (from_client ? !request : !reply)
    return "unexpected operation " + std::to_string(f.op);
  bool floats = f.op == data_frame::push || f.op == data_frame::values
                || f.op == data_frame::rows;
  bool parts = f.op == data_frame::row_pulls || f.op == data_frame::row_pushes;
  bool ids = f.op == data_frame::row_pull || f.op == data_frame::row_push
             || parts;
  if (floats && f.count > max_frame_floats)
    return "announces " + std::to_string(f.count) + " floats (at most "
           + std::to_string(max_frame_floats) + ")";
  if (ids && f.count > max_frame_rows)
    return "announces " + std::to_string(f.count) + " rows (at most "
           + std::to_string(max_frame_rows) + ")";
  // Each part is two uint64s (its table and its number of ids) before
  // the ids: at least one part, and room for its pair.
  if (parts && (f.table == 0 || f.count < 2 * uint64_t{f.table}))
    return "announces " + std::to_string(f.table) + " parts in "
           + std::to_string(f.count) + " uint64s";
  if (f.op == data_frame::error && f.count > max_error_text)
    return "announces " + std::to_string(f.count) + " bytes of error text";
  if (f.op == data_frame::replica && f.count > max_replica_bytes)
    return "announces a replica frame of " + std::to_string(f.count) + " bytes";
  bool shared = f.op == data_frame::shared_offer
                || f.op == data_frame::shared_answer;
  if (shared && f.count > max_shared_text)
    return "announces " + std::to_string(f.count)
           + " bytes of a shared-memory offer or answer";
  if (!floats && !ids && !shared && f.op != data_frame::error
      && f.op != data_frame::replica && f.count != 0)
    return "a frame without payload announces " + std::to_string(f.count);
  if (f.shard < 0)
    return "negative shard " + std::to_string(f.shard);
  if (from_client && (f.id == 0 || f.id > caf::message_id::request_id_mask))
    return "request id " + std::to_string(f.id) + " (1 to 2^60 - 1)";
  return {};
}

namespace {

// -- the server --------------------------------------------------------------

/// The shards a server answers for, their sizes and their tables' widths.
class shard_registry {
public:
  void put(int32_t id, shard_data_actor h, uint64_t size,
           std::vector<int> row_dims) {
    std::lock_guard<std::mutex> guard{mtx_};
    shards_[id] = {std::move(h), size, std::move(row_dims)};
  }
  shard_data_actor get(int32_t id) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = shards_.find(id);
    return it == shards_.end() ? shard_data_actor{} : it->second.handle;
  }
  /// The size of shard `id`; 0 when there is no such shard.
  uint64_t size(int32_t id) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = shards_.find(id);
    return it == shards_.end() ? 0 : it->second.size;
  }
  /// The width of table `table` on shard `id`; 0 when there is none.
  uint64_t row_dim(int32_t id, uint16_t table) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = shards_.find(id);
    if (it == shards_.end() || table >= it->second.row_dims.size())
      return 0;
    return static_cast<uint64_t>(it->second.row_dims[table]);
  }

private:
  struct entry {
    shard_data_actor handle;
    uint64_t size = 0;
    std::vector<int> row_dims;
  };
  std::mutex mtx_;
  std::map<int32_t, entry> shards_;
};

/// Where one shard's replies to one connection's requests go. The reader
/// thread puts each request straight into the shard's mailbox, with this
/// as its sender and the frame's id as its request id; the shard's reply
/// comes here on the shard's own thread, as a call, and goes to the
/// writer as it is. (An actor relaying between them cost two more
/// hand-offs between threads per request, and a timer per request on the
/// clock thread: without them, a shard node's context switches in an MLP
/// run fell from 18,500 to 10,400.)
class reply_sink {
public:
  reply_sink(caf::actor_system& sys, std::shared_ptr<frame_writer> writer,
             int32_t shard)
    : handle_(sys.spawn<caf::actor_companion, caf::hidden>()) {
    companion()->on_enqueue(
      [writer = std::move(writer), shard](caf::mailbox_element_ptr m) {
        if (m && m->mid.is_response())
          writer->post(
            frame_of(m->mid.request_id().integer_value(), shard, m->content()));
      });
  }

  reply_sink(const reply_sink&) = delete;
  reply_sink& operator=(const reply_sink&) = delete;

  /// Replies that come after this are dropped: the connection is gone.
  /// (The companion ends with its last reference, a request's sender.)
  ~reply_sink() { companion()->on_enqueue({}); }

  /// Hands request `id` (a data-plane frame's, nonzero and within CAF's
  /// request ids: check_frame) to `shard`.
  template <class... Ts>
  void ask(const shard_data_actor& shard, uint64_t id, Ts&&... xs) {
    caf::actor_cast<caf::strong_actor_ptr>(shard)->enqueue(
      caf::actor_cast<caf::strong_actor_ptr>(handle_), caf::make_message_id(id),
      caf::make_message(std::forward<Ts>(xs)...), nullptr);
  }

private:
  caf::actor_companion* companion() {
    return caf::actor_cast<caf::actor_companion*>(handle_);
  }

  /// The frame of a shard's reply to request `id`.
  static outgoing frame_of(uint64_t id, int32_t shard,
                           caf::type_erased_tuple& reply) {
    if (reply.match_elements<push_ack>())
      return reply_frame(id, shard, reply.get_mutable_as<push_ack>(0));
    if (reply.match_elements<float_block>())
      return reply_frame(id, shard, reply.get_mutable_as<float_block>(0));
    if (reply.match_elements<row_block>())
      return reply_frame(id, shard, reply.get_mutable_as<row_block>(0));
    if (reply.match_elements<row_blocks>())
      return rows_frame(id, shard, reply.get_mutable_as<row_blocks>(0));
    if (reply.match_elements<caf::error>())
      return error_frame(id, shard, reply.get_as<caf::error>(0));
    return error_frame(id, shard,
                       make_error(errc::invalid_argument,
                                  "the shard gave an unexpected reply: "
                                    + to_string(reply)));
  }

  caf::actor handle_;
};

/// How many requests of one connection are read but not yet answered on
/// the wire. Shared by the session's reader and its writer's callback,
/// which a shard may still call after the session is gone.
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
    cv.wait(guard,
            [&] { return open < max_open || closing || writer.failed(); });
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

/// One accepted connection: its reader thread, writer and reply sinks.
struct session {
  explicit session(caf::actor_system& system) : sys(system) {}
  caf::actor_system& sys;
  std::shared_ptr<shard_registry> shards;
  std::shared_ptr<link_socket> tcp;
  /// What the frames travel on: tcp, or shared memory in its place
  /// (replaced by the reader thread alone, under `mtx`).
  std::shared_ptr<byte_link> sock;
  std::mutex mtx;
  bool stopping = false;

  /// Frames go on `link` from now on; false when the session is stopping.
  bool switch_to(std::shared_ptr<byte_link> link) {
    std::lock_guard<std::mutex> guard{mtx};
    if (stopping) {
      link->shutdown();
      return false;
    }
    sock = std::move(link);
    return true;
  }

  /// Ends the connection: its link, and the TCP connection under it.
  void shut() {
    std::lock_guard<std::mutex> guard{mtx};
    stopping = true;
    if (sock)
      sock->shutdown();
    if (tcp)
      tcp->shutdown();
  }

  /// Lets go of both once the reader and the writer are done: a shared
  /// segment is unmapped, and the socket closed, when the peer goes.
  void release() {
    std::lock_guard<std::mutex> guard{mtx};
    sock.reset();
    tcp.reset();
  }

  std::shared_ptr<frame_writer> writer = std::make_shared<frame_writer>();
  std::shared_ptr<request_gate> gate = std::make_shared<request_gate>();
  /// Each shard's, made at its first request (the reader thread's alone).
  std::map<int32_t, std::unique_ptr<reply_sink>> sinks;
  std::thread reader;
  std::atomic<bool> done{false};
};

/// Hands request `f` (its message: `xs`) to its shard, or answers that
/// this node has no such shard.
template <class... Ts>
void ask(session& s, const data_frame& f, Ts&&... xs) {
  auto h = s.shards->get(f.shard);
  if (!h) {
    s.writer->post(error_frame(f.id, f.shard,
                               make_error(errc::invalid_argument,
                                          "no shard " + std::to_string(f.shard)
                                            + " on this node")));
    return;
  }
  auto& sink = s.sinks[f.shard];
  if (!sink)
    sink = std::make_unique<reply_sink>(s.sys, s.writer, f.shard);
  sink->ask(h, f.id, std::forward<Ts>(xs)...);
}

/// Reads the `count` uint64s after header `f` (row ids, and the parts of
/// several tables' rows), in pieces: the buffer grows with what came, so
/// a header alone makes nothing large. False when the connection broke.
bool read_words(session& s, const data_frame& f, std::vector<uint64_t>& out) {
  constexpr uint64_t piece = 1 << 16;
  while (out.size() < f.count) {
    auto at = out.size();
    auto take = std::min<uint64_t>(piece, f.count - at);
    out.resize(at + take);
    if (!s.sock->read_exact(out.data() + at, take * sizeof(uint64_t)))
      return false;
  }
  return true;
}

/// Reads the rest of a row_pull or row_push and hands it to its shard;
/// false when the connection is to close (it broke, or the frame names a
/// table whose rows the server cannot size).
bool read_rows(session& s, const data_frame& f) {
  auto dim = s.shards->row_dim(f.shard, f.table);
  if (f.op == data_frame::row_push && dim == 0) {
    // The floats that follow cannot be sized: the stream is lost.
    std::cerr << "troupe: data plane: closing the connection from "
              << s.sock->peer() << ": a row push for table " << f.table
              << " of shard " << f.shard << ", which this node does not hold"
              << std::endl;
    return false;
  }
  if (f.op == data_frame::row_push && f.count * dim > max_frame_floats) {
    std::cerr << "troupe: data plane: closing the connection from "
              << s.sock->peer() << ": a row push of " << f.count << " rows of "
              << dim << " floats (at most " << max_frame_floats << " floats)"
              << std::endl;
    return false;
  }
  // The gradients are allocated once the ids are in, dim / 2 times their
  // bytes.
  std::vector<uint64_t> ids;
  if (!read_words(s, f, ids))
    return false;
  if (f.op == data_frame::row_pull) {
    // An unknown table costs nothing to answer: the shard names it.
    ask(s, f, pull_atom_v, message_of<row_request>(f, std::move(ids)));
    return true;
  }
  auto grads = pooled_floats(f.count * dim);
  if (!s.sock->read_exact(grads->data(), grads->size() * sizeof(float)))
    return false;
  ask(s, f, push_atom_v,
      message_of<row_push>(f, std::move(ids), std::move(grads)));
  return true;
}

/// Reads the rest of a row_pulls or row_pushes frame and hands its parts
/// to its shard in one request; false when the connection is to close (it
/// broke, or the parts do not add up to the frame, or a push's table is
/// one whose rows the server cannot size).
bool read_row_parts(session& s, const data_frame& f) {
  auto refuse = [&](const std::string& why) {
    std::cerr << "troupe: data plane: closing the connection from "
              << s.sock->peer() << ": " << why << std::endl;
    return false;
  };
  std::vector<uint64_t> words;
  if (!read_words(s, f, words))
    return false;
  bool push = f.op == data_frame::row_pushes;
  size_t parts = f.table; // check_frame: at least one, and room for them
  uint64_t at = 2 * parts, floats = 0;
  std::vector<uint64_t> dims(parts);
  for (size_t k = 0; k < parts; ++k) {
    auto table = words[2 * k], n = words[2 * k + 1];
    if (table > 0xFFFF || n > f.count - at)
      return refuse("part " + std::to_string(k) + " (table "
                    + std::to_string(table) + ", " + std::to_string(n)
                    + " rows) does not fit a frame of "
                    + std::to_string(f.count) + " uint64s");
    at += n;
    if (!push)
      continue;
    dims[k] = s.shards->row_dim(f.shard, static_cast<uint16_t>(table));
    if (dims[k] == 0)
      return refuse("a row push for table " + std::to_string(table)
                    + " of shard " + std::to_string(f.shard)
                    + ", which this node does not hold");
    floats += n * dims[k];
    if (floats > max_frame_floats)
      return refuse("row pushes of more than "
                    + std::to_string(max_frame_floats) + " floats");
  }
  if (at != f.count)
    return refuse(std::to_string(f.count - at)
                  + " uint64s after the parts' ids");
  auto ids_of = [&](size_t k, uint64_t& from) {
    auto n = words[2 * k + 1];
    std::vector<uint64_t> ids(words.begin() + static_cast<ptrdiff_t>(from),
                              words.begin() + static_cast<ptrdiff_t>(from + n));
    from += n;
    return ids;
  };
  uint64_t from = 2 * parts;
  if (!push) {
    row_requests r;
    for (size_t k = 0; k < parts; ++k)
      r.parts.push_back({f.shard, static_cast<int32_t>(words[2 * k]), f.worker,
                         ids_of(k, from), f.flag != 0});
    // An unknown table costs nothing to answer: the shard names it.
    ask(s, f, pull_atom_v, std::move(r));
    return true;
  }
  row_pushes r;
  for (size_t k = 0; k < parts; ++k) {
    row_push p;
    p.shard = f.shard;
    p.table = static_cast<int32_t>(words[2 * k]);
    p.worker = f.worker;
    p.batch = f.batch;
    p.tag = f.tag;
    p.ids = ids_of(k, from);
    auto grads = pooled_floats(p.ids.size() * dims[k]);
    if (!s.sock->read_exact(grads->data(), grads->size() * sizeof(float)))
      return false;
    p.grads = std::move(grads);
    r.parts.push_back(std::move(p));
  }
  ask(s, f, push_atom_v, std::move(r));
  return true;
}

/// Reads the rest of a replica frame and hands its op to its shard;
/// false when the connection is to close (it broke, or the bytes are no
/// replica_op).
bool read_replica_op(session& s, const data_frame& f) {
  // The bytes arrive in pieces, and the buffer grows with what came.
  std::vector<char> bytes;
  constexpr uint64_t piece = uint64_t{1} << 20;
  while (bytes.size() < f.count) {
    auto at = bytes.size();
    auto take = std::min<uint64_t>(piece, f.count - at);
    bytes.resize(at + take);
    if (!s.sock->read_exact(bytes.data() + at, take))
      return false;
  }
  replica_op op;
  caf::binary_deserializer source{nullptr, bytes};
  if (auto err = inspect(source, op); err || source.remaining() != 0) {
    std::cerr << "troupe: data plane: closing the connection from "
              << s.sock->peer() << ": a replica frame of " << f.count
              << " bytes that is no replica op" << std::endl;
    return false;
  }
  ask(s, f, replicate_atom_v, std::move(op));
  return true;
}

/// Answers a client's offer of shared memory (its first frame, `f`):
/// false when the connection is to close.
bool answer_offer(session& s, const data_frame& f) {
  auto link = answer_shared_link(*s.tcp, f, shared_links_allowed(s.sys));
  if (!link) {
    std::cerr << "troupe: data plane: closing the connection from "
              << s.tcp->peer() << ": " << describe(link.error()) << std::endl;
    return false;
  }
  return !*link || s.switch_to(std::move(*link));
}

/// Reads requests until the connection ends or sends a bad frame.
void serve_connection(session& s) {
  bool first = true;
  for (;;) {
    data_frame f;
    if (!s.sock->read_exact(&f, sizeof(f)))
      break;
    if (auto why = check_frame(f, true); !why.empty()) {
      std::cerr << "troupe: data plane: closing the connection from "
                << s.sock->peer() << ": " << why << std::endl;
      break;
    }
    if (f.op == data_frame::shared_offer) {
      if (!first) {
        std::cerr << "troupe: data plane: closing the connection from "
                  << s.sock->peer()
                  << ": an offer of shared memory after its first frame"
                  << std::endl;
        break;
      }
      first = false;
      if (!answer_offer(s, f))
        break;
      s.writer->start(s.sock);
      continue;
    }
    if (first) {
      first = false;
      s.writer->start(s.sock);
    }
    if (!s.gate->admit(*s.writer))
      break;
    if (f.op == data_frame::pull) {
      auto p = pull_of(f);
      ask(s, f, pull_atom_v, p.worker, p.min_version);
      continue;
    }
    if (f.op == data_frame::row_pull || f.op == data_frame::row_push) {
      if (!read_rows(s, f))
        break;
      continue;
    }
    if (f.op == data_frame::row_pulls || f.op == data_frame::row_pushes) {
      if (!read_row_parts(s, f))
        break;
      continue;
    }
    if (f.op == data_frame::replica) {
      if (!read_replica_op(s, f))
        break;
      continue;
    }
    // No push is larger than its shard: memory is only spent on what a
    // legitimate peer may send.
    if (auto size = s.shards->size(f.shard); f.count > size) {
      std::cerr << "troupe: data plane: closing the connection from "
                << s.sock->peer() << ": a push of " << f.count
                << " floats for shard " << f.shard << ", which holds " << size
                << std::endl;
      break;
    }
    auto values = pooled_floats(f.count);
    if (!s.sock->read_exact(values->data(), f.count * sizeof(float)))
      break;
    ask(s, f, push_atom_v, message_of<gradient_push>(f, {}, std::move(values)));
  }
  s.shut();
  s.writer->stop();
  s.sinks.clear();
  s.release();
  s.done = true;
}

} // namespace

class data_server_impl {
public:
  /// Serves listening socket `fd`: behind a front door when `guard` is
  /// set (the cluster key or TLS), else with a plain accept loop.
  data_server_impl(caf::actor_system& sys, int fd,
                   std::shared_ptr<const link_guard> guard)
    : sys_(sys), listen_fd_(fd), port_(local_port_of(fd)) {
    if (guard)
      door_ = std::make_unique<front_door>(
        fd, std::move(guard),
        [this](int peer, ssl_ptr ssl) { admit(peer, std::move(ssl)); },
        "data plane", true);
    else
      acceptor_ = std::thread([this] { accept_loop(); });
  }

  uint16_t port() const { return port_; }

  void serve(int32_t id, shard_data_actor h, uint64_t size,
             std::vector<int> row_dims) {
    shards_->put(id, std::move(h), size, std::move(row_dims));
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
      s->shut();
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

  /// Starts a session on a new connection (proven already when the links
  /// are guarded).
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
    auto s = std::make_unique<session>(sys_);
    s->shards = shards_;
    s->tcp = sock;
    s->sock = sock;
    // The writer starts on what the first frame leaves the frames on.
    s->writer->on_progress([gate = s->gate] { gate->answered(); });
    auto* raw = s.get();
    s->reader = std::thread([raw] { serve_connection(*raw); });
    sessions_.push_back(std::move(s));
  }

  static constexpr size_t max_sessions = 256;

  caf::actor_system& sys_;
  int listen_fd_;
  uint16_t port_;
  std::shared_ptr<shard_registry> shards_ = std::make_shared<shard_registry>();
  std::unique_ptr<front_door> door_;
  std::thread acceptor_;
  std::mutex mtx_;
  std::list<std::unique_ptr<session>> sessions_;
  bool stopped_ = false;
};

caf::expected<std::shared_ptr<data_server>>
data_server::start(caf::actor_system& sys, const std::string& host,
                   uint16_t port) {
  auto sec = security_of(sys);
  if (auto err = sec->may_listen(host, "the data plane"))
    return err;
  // A fixed port is bound again by a restarted node while its old
  // connections linger in TIME_WAIT.
  auto fd = listen_on(host, port, port != 0);
  // The node's own address and port, from its config or flags: a port
  // another program holds, or a host that is not this one, is bad input
  // (exit 2), as for its control port.
  if (!fd)
    return make_error(errc::invalid_config,
                      "cannot listen for the data plane on " + host
                        + (port != 0 ? ":" + std::to_string(port)
                                     : std::string{})
                        + ": " + describe(fd.error()));
  return std::make_shared<data_server>(
    std::make_unique<data_server_impl>(sys, *fd, sec->guard));
}

data_server::data_server(std::unique_ptr<data_server_impl> impl)
  : impl_(std::move(impl)) {}

data_server::~data_server() {
  stop();
}

uint16_t data_server::port() const {
  return impl_->port();
}

void data_server::serve(int32_t id, shard_data_actor handle, uint64_t size,
                        std::vector<int> row_dims) {
  impl_->serve(id, std::move(handle), size, std::move(row_dims));
}

void data_server::stop() {
  impl_->stop();
}

} // namespace troupe
