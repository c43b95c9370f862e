// A worker node's end of the data plane (actors/data_plane/data_link.hpp): one
// connection per shard node, and stub actors that stand for its shards.
#include "actors/data_plane/data_link.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/data_plane/shared_upgrade.hpp"
#include "actors/net/link_socket.hpp"
#include "actors/net/remote.hpp"
#include "actors/net/sockets.hpp"
#include "runtime/base/errc.hpp"
#include "actors/data_plane/data_frames.hpp"
#include "actors/data_plane/outgoing_rows.hpp"

namespace troupe {

using namespace data_wire;

/// A stub: the shard's data requests, which it sends on the connection
/// (the connection's reader thread answers each asker itself), the news
/// that the connection broke, and its timer for requests left unanswered.
using stub_actor =
  shard_data_actor::extend<caf::reacts_to<data_atom, caf::error>,
                           caf::reacts_to<expire_atom>>;

/// Who asked a stub a request: the reader thread answers them directly.
/// A reply through the stub cost one more thread hand-off per request,
/// on the path a worker waits on (docs/benchmarks.md, "Processes against
/// one process").
struct asker {
  caf::strong_actor_ptr stub;   ///< the reply's sender
  caf::strong_actor_ptr source; ///< null: asked without a sender, unanswered
  caf::message_id id;           ///< the request's
};

// -- the client --------------------------------------------------------------

class data_client_impl {
public:
  data_client_impl(caf::actor_system& sys, std::string host, uint16_t port,
                   caf::timespan timeout,
                   std::shared_ptr<const link_guard> guard)
    : sys_(sys), host_(std::move(host)), port_(port), timeout_(timeout),
      guard_(std::move(guard)) {}

  void begin() {
    reader_ = std::thread([this] {
      run();
      release_link();
    });
  }

  std::string address() const { return host_ + ":" + std::to_string(port_); }

  caf::actor_system& system() { return sys_; }

  /// Unique among the requests of every connection of this process: a
  /// reply a closed connection's reader handed over late never answers a
  /// request of another connection to the same actor.
  static uint64_t next_id() {
    static std::atomic<uint64_t> next{1};
    return next++;
  }

  /// Sends a request whose reply goes to `from`'s asker, when it names
  /// one (a stub's request), or else to `to` as a data_atom message (an
  /// actor that sends without a stub); false (and no reply goes anywhere)
  /// when the connection is gone. A row_pull's reply must hold `row_floats`
  /// floats: the rows asked for, and no others; a row_pulls' reply is split
  /// into its parts' rows, each part's table and floats as `part_floats` says.
  bool send(outgoing o, caf::actor to, uint64_t row_floats = 0,
            std::vector<row_part> part_floats = {}, asker from = {}) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (broken_)
      return false;
    auto id = o.head.id;
    waiting_[id] = {std::move(to),   o.head.op,
                    row_floats,      std::move(part_floats),
                    std::move(from), std::chrono::steady_clock::now()};
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

  void add_stub(stub_actor stub, int32_t shard, uint64_t size,
                std::vector<int> row_dims) {
    std::lock_guard<std::mutex> guard{mtx_};
    stubs_.push_back(std::move(stub));
    sizes_[shard] = size;
    row_dims_[shard] = std::move(row_dims);
  }

  /// The widths of shard `shard`'s tables, as its stub was made with.
  std::vector<int> row_dims(int32_t shard) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = row_dims_.find(shard);
    return it == row_dims_.end() ? std::vector<int>{} : it->second;
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
      if (tcp_)
        tcp_->shutdown();
      else if (fd_ >= 0) // connecting, or in the handshake
        ::shutdown(fd_, SHUT_RDWR);
    }
    if (reader_.joinable())
      reader_.join();
    writer_->stop();
    std::lock_guard<std::mutex> guard{mtx_};
    sock_.reset();
    tcp_.reset();
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
    if (guard_) {
      set_nonblocking(fd, true);
      auto proof = guard_->connect(fd, true);
      why = finish_proof(*proof, fd,
                         std::chrono::steady_clock::now() + guard_->timeout());
      if (!why.empty()) {
        {
          std::lock_guard<std::mutex> guard{mtx_};
          fd_ = -1;
          ::close(fd);
        }
        return fail_all(guard_->handshake() + " failed: " + why);
      }
      ssl = proof->take_session();
    }
    auto tcp = std::make_shared<link_socket>(fd, std::move(ssl));
    {
      std::lock_guard<std::mutex> guard{mtx_};
      tcp_ = tcp;
      fd_ = -1; // tcp_'s now; close() shuts it down, ending an offer too
      if (closed_)
        tcp->shutdown();
    }
    std::shared_ptr<byte_link> sock = tcp;
    if (shared_links_allowed(sys_)) {
      std::string note;
      auto shared = offer_shared_link(*tcp, timeout_, note);
      if (!shared)
        return fail_all(describe(shared.error()));
      if (*shared)
        sock = std::move(*shared);
      else if (note != "another host")
        std::cerr << "troupe: data plane to " << address()
                  << ": TCP, not shared memory: " << note << std::endl;
    }
    {
      std::lock_guard<std::mutex> guard{mtx_};
      sock_ = sock;
      up_ = true;
      if (closed_) {
        sock->shutdown();
        tcp->shutdown();
      }
    }
    writer_->start(sock);
    for (;;) {
      data_frame f;
      if (!sock->read_exact(&f, sizeof(f)))
        return fail_all("the connection broke");
      if (auto bad = check_frame(f, false); !bad.empty())
        return fail_all("bad frame from the shard node: " + bad);
      auto w = take_waiting(f.id);
      auto asked = w.op;
      // Whoever waits for this reply is no longer among the waiting that
      // fail_all fails.
      auto fail = [&](const std::string& reason) {
        fail_all(reason);
        deliver(w, f.id, link_error(reason));
      };
      // A reply answers its kind of request (an error answers any), and
      // the rows of a row pull are the ones asked for.
      bool fits = f.op == data_frame::error || asked == 0
                  || (f.op == data_frame::values && asked == data_frame::pull)
                  || (f.op == data_frame::ack
                      && (asked == data_frame::push
                          || asked == data_frame::row_push
                          || asked == data_frame::row_pushes
                          || asked == data_frame::replica))
                  || (f.op == data_frame::rows
                      && (asked == data_frame::row_pull
                          || asked == data_frame::row_pulls));
      if (!fits)
        return fail("bad frame from the shard node: a reply of the "
                    "wrong kind to request "
                    + std::to_string(f.id));
      if (f.op == data_frame::rows) {
        // Nobody waiting (row_floats 0) means no rows were asked for.
        if (f.count != w.row_floats)
          return fail("bad frame from the shard node: "
                      + std::to_string(f.count)
                      + " floats of rows for "
                        "request "
                      + std::to_string(f.id)
                      + ", which asked "
                        "for "
                      + std::to_string(w.row_floats));
        auto values = pooled_floats(f.count);
        if (!sock->read_exact(values->data(), f.count * sizeof(float)))
          return fail("the connection broke");
        if (!w.waits())
          continue;
        if (asked == data_frame::row_pulls)
          deliver(w, f.id, split_rows(f.shard, *values, w.part_floats));
        else
          deliver(w, f.id, message_of<row_block>(f, {}, std::move(values)));
        continue;
      }
      if (f.op == data_frame::values) {
        // Values of the shard's size, or none with "ask again" (version -1).
        if (auto size = size_of(f.shard);
            f.count != size && !(f.count == 0 && f.tag < 0))
          return fail("bad frame from the shard node: "
                      + std::to_string(f.count) + " values for shard "
                      + std::to_string(f.shard) + ", which holds "
                      + std::to_string(size));
        auto values = pooled_floats(f.count);
        if (!sock->read_exact(values->data(), f.count * sizeof(float)))
          return fail("the connection broke");
        deliver(w, f.id, message_of<float_block>(f, {}, std::move(values)));
      } else if (f.op == data_frame::ack) {
        deliver(w, f.id, message_of<push_ack>(f));
      } else {
        std::string text(f.count, '\0');
        if (!sock->read_exact(text.data(), text.size()))
          return fail("the connection broke");
        deliver(w, f.id, error_of(f, std::move(text)));
      }
    }
  }

  /// The connection has ended: its link goes now (a shared segment is
  /// unmapped), not when the client is closed.
  void release_link() {
    writer_->break_link();
    std::lock_guard<std::mutex> guard{mtx_};
    if (sock_)
      sock_->shutdown();
    if (tcp_)
      tcp_->shutdown();
    sock_.reset();
    tcp_.reset();
  }

  uint64_t size_of(int32_t shard) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = sizes_.find(shard);
    return it == sizes_.end() ? 0 : it->second;
  }

public:
  struct waiting {
    caf::actor to; ///< the actor that sent without a stub
    uint8_t op = 0;
    uint64_t row_floats = 0; ///< row_pull(s): floats its reply must hold
    std::vector<row_part> part_floats; ///< row_pulls: each part's
    asker from;                        ///< a stub's request: who asked it
    std::chrono::steady_clock::time_point sent;
    bool waits() const { return to || from.source; }
  };

  /// Hands request `id`'s reply (or error) to whoever waits for it: a
  /// stub's asker as the answer to its request, from any thread (an
  /// enqueue without an execution unit schedules the asker as a send from
  /// outside CAF does), or `to` as a data_atom message.
  template <class T>
  static void deliver(waiting& w, uint64_t id, T&& value) {
    if (w.from.source)
      w.from.source->enqueue(w.from.stub, w.from.id.response_id(),
                             caf::make_message(std::forward<T>(value)),
                             nullptr);
    else if (w.to)
      caf::anon_send(w.to, data_atom_v, id, std::forward<T>(value));
  }

  /// Takes the stubs' requests that have waited the connection's timeout
  /// by `now`, to be failed with request_timeout.
  std::vector<std::pair<uint64_t, waiting>>
  take_expired(std::chrono::steady_clock::time_point now) {
    std::lock_guard<std::mutex> guard{mtx_};
    std::vector<std::pair<uint64_t, waiting>> out;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (!it->second.from.source) {
        ++it;
        continue;
      }
      // Ids are taken in about the order sent: a later one is caught by
      // the next check.
      if (it->second.sent + timeout_ > now)
        break;
      out.emplace_back(it->first, std::move(it->second));
      it = waiting_.erase(it);
    }
    return out;
  }

  /// When the oldest stub request still waiting expires; nullopt when
  /// none waits.
  std::optional<std::chrono::steady_clock::time_point> next_expiry() {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& [id, w] : waiting_)
      if (w.from.source)
        return w.sent + timeout_;
    return std::nullopt;
  }

private:
  /// The rows of a row_pulls reply (as many floats as its parts'), each
  /// part's in a buffer of its own.
  static row_blocks split_rows(int32_t shard, const std::vector<float>& all,
                               const std::vector<row_part>& parts) {
    row_blocks out;
    auto at = all.begin();
    for (auto& part : parts) {
      auto n = static_cast<ptrdiff_t>(part.floats);
      auto values = pooled_floats(part.floats);
      std::copy(at, at + n, values->begin());
      at += n;
      out.parts.push_back({shard, part.table, std::move(values)});
    }
    return out;
  }

  /// Who waits for request `id`, the request's operation (0 when nobody
  /// waits for it) and what its rows must hold.
  waiting take_waiting(uint64_t id) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = waiting_.find(id);
    if (it == waiting_.end())
      return {};
    auto out = std::move(it->second);
    waiting_.erase(it);
    return out;
  }

  /// The connection is gone: every open request fails, and every stub
  /// fails everything it is asked from now on.
  void fail_all(const std::string& why) {
    std::lock_guard<std::mutex> guard{mtx_};
    broken_ = true;
    why_ = why;
    auto err = link_error(why);
    for (auto& [id, w] : waiting_)
      deliver(w, id, err);
    waiting_.clear();
    for (auto& s : stubs_)
      caf::anon_send(s, data_atom_v, err);
  }

  caf::actor_system& sys_;
  std::string host_;
  uint16_t port_;
  /// How long the connection may take to come up, and a request to be
  /// answered.
  caf::timespan timeout_;
  std::shared_ptr<const link_guard> guard_; ///< null: plaintext, no proof
  std::thread reader_;
  std::shared_ptr<frame_writer> writer_ = std::make_shared<frame_writer>();
  std::mutex mtx_;
  int fd_ = -1; ///< until tcp_ takes it over
  std::shared_ptr<link_socket> tcp_;
  /// What the frames travel on: tcp_, or shared memory in its place.
  std::shared_ptr<byte_link> sock_;
  bool up_ = false, broken_ = false, closed_ = false;
  std::string why_;
  std::map<uint64_t, waiting> waiting_;
  std::vector<stub_actor> stubs_;
  std::map<int32_t, uint64_t> sizes_; ///< floats per shard, from the stubs
  std::map<int32_t, std::vector<int>> row_dims_; ///< and their tables' widths
};

namespace {

struct stub_state {
  static inline const char* name = shard_stub_name; // times_out_itself
  bool expiry_set = false; ///< an expire_atom is on its way
  caf::error broken;
};

using stub_pointer = stub_actor::stateful_pointer<stub_state>;

/// Sets the timer for the oldest request waiting on `link`. One timer on
/// CAF's clock per stub at a time, not one per request: a worker asks a
/// stub without a timeout of its own (times_out_itself), which saves its
/// clock thread a hand-off per request. Any stub's timer fails any
/// stub's expired requests: each goes to its asker directly.
void expire_later(stub_pointer self, data_client_impl& link) {
  auto& st = self->state;
  if (st.expiry_set)
    return;
  auto due = link.next_expiry();
  if (!due)
    return;
  st.expiry_set = true;
  auto now = std::chrono::steady_clock::now();
  self->delayed_send(
    self, std::max<caf::timespan>(*due - now, caf::timespan{0}), expire_atom_v);
}

/// Fails the requests whose time is up with request_timeout; sets the
/// timer for the next one.
void expire_due(stub_pointer self, data_client_impl& link) {
  self->state.expiry_set = false;
  for (auto& [id, w] : link.take_expired(std::chrono::steady_clock::now()))
    data_client_impl::deliver(w, id,
                              caf::make_error(caf::sec::request_timeout));
  expire_later(self, link);
}

/// Sends `o` for shard `shard` on `link`; the reply, of type T, goes from
/// the connection's reader thread straight to whoever asked. The promise
/// only marks the request as answered later; nothing delivers it once
/// the request is on its way.
template <class T>
caf::result<T> send_request(stub_pointer self, data_client_impl& link,
                            int32_t shard, outgoing o, uint64_t row_floats = 0,
                            std::vector<row_part> part_floats = {}) {
  auto rp = self->make_response_promise<T>();
  if (self->state.broken) {
    rp.deliver(self->state.broken);
    return rp;
  }
  auto id = link.next_id();
  o.head.id = id;
  o.head.shard = shard;
  auto& promise = static_cast<caf::response_promise&>(rp);
  asker from{caf::actor_cast<caf::strong_actor_ptr>(self), promise.source(),
             promise.id()};
  if (!link.send(std::move(o), nullptr, row_floats, std::move(part_floats),
                 std::move(from))) {
    rp.deliver(link.broken_reason());
    return rp;
  }
  expire_later(self, link);
  return rp;
}

/// Stands for a remote shard: pull and push, of values and of rows, go
/// over the data link.
stub_actor::behavior_type stub_impl(stub_pointer self,
                                    std::shared_ptr<data_client_impl> link,
                                    int32_t shard, std::vector<int> row_dims) {
  return {
    [=](pull_atom, int32_t worker, int64_t min_version) {
      return send_request<float_block>(self, *link, shard,
                                       pull_frame(worker, min_version));
    },
    [=](push_atom, gradient_push& g) {
      return send_request<push_ack>(self, *link, shard, request_frame(g));
    },
    [=](pull_atom, row_request& r) -> caf::result<row_block> {
      auto dim = dim_of(row_dims, r.table);
      if (dim == 0)
        return no_table(shard, row_dims, r.table);
      if (r.ids.size() > max_frame_rows)
        return make_error(errc::invalid_argument,
                          "a pull of " + std::to_string(r.ids.size())
                            + " rows (at most " + std::to_string(max_frame_rows)
                            + " per request)");
      auto row_floats = r.ids.size() * dim;
      return send_request<row_block>(self, *link, shard, request_frame(r),
                                     row_floats);
    },
    [=](push_atom, row_push& p) -> caf::result<push_ack> {
      auto frame = row_push_frame(shard, row_dims, p);
      if (!frame)
        return std::move(frame.error());
      return send_request<push_ack>(self, *link, shard, std::move(*frame));
    },
    [=](pull_atom, row_requests& r) -> caf::result<row_blocks> {
      auto parts = row_pulls_parts(shard, row_dims, r);
      if (!parts)
        return std::move(parts.error());
      uint64_t total = 0;
      for (auto& part : *parts)
        total += part.floats;
      return send_request<row_blocks>(
        self, *link, shard, parts_frame(data_frame::row_pulls, r.parts), total,
        std::move(*parts));
    },
    [=](push_atom, row_pushes& p) -> caf::result<push_ack> {
      if (auto err = check_row_pushes(shard, row_dims, p))
        return err;
      return send_request<push_ack>(
        self, *link, shard, parts_frame(data_frame::row_pushes, p.parts));
    },
    [=](replicate_atom, replica_op& op) -> caf::result<push_ack> {
      auto frame = replica_frame(op);
      if (!frame)
        return std::move(frame.error());
      return send_request<push_ack>(self, *link, shard, std::move(*frame));
    },
    // Its open requests failed with the connection (fail_all).
    [=](data_atom, caf::error& err) { self->state.broken = err; },
    [=](expire_atom) { expire_due(self, *link); },
  };
}

} // namespace

std::shared_ptr<data_client> data_client::open(caf::actor_system& sys,
                                               const std::string& host,
                                               uint16_t port,
                                               caf::timespan timeout) {
  auto impl = std::make_shared<data_client_impl>(sys, host, port, timeout,
                                                 security_of(sys)->guard);
  impl->begin();
  return std::make_shared<data_client>(std::move(impl));
}

data_client::data_client(std::shared_ptr<data_client_impl> impl)
  : impl_(std::move(impl)) {}

data_client::~data_client() {
  close();
}

shard_data_actor data_client::stub(int32_t shard, uint64_t size,
                                   std::vector<int> row_dims) {
  // The stub keeps the connection's state alive for as long as it runs.
  auto h = impl_->system().spawn(stub_impl, impl_, shard, row_dims);
  impl_->add_stub(h, shard, size, std::move(row_dims));
  return h;
}

namespace {

/// Sends `frame` (or fails with its error) for shard `shard` on `link`,
/// its answer to `to`.
caf::expected<uint64_t> send_for(data_client_impl& link, int32_t shard,
                                 caf::expected<outgoing> frame,
                                 const caf::actor& to) {
  if (!frame)
    return std::move(frame.error());
  auto id = data_client_impl::next_id();
  frame->head.id = id;
  frame->head.shard = shard;
  if (!link.send(std::move(*frame), to))
    return link.broken_reason();
  return id;
}

} // namespace

caf::expected<uint64_t> data_client::send(int32_t shard, gradient_push g,
                                          const caf::actor& to) {
  return send_for(*impl_, shard, request_frame(g), to);
}

caf::expected<uint64_t> data_client::send(int32_t shard, row_push p,
                                          const caf::actor& to) {
  return send_for(*impl_, shard,
                  row_push_frame(shard, impl_->row_dims(shard), p), to);
}

caf::expected<uint64_t> data_client::send(int32_t shard, const replica_op& op,
                                          const caf::actor& to) {
  return send_for(*impl_, shard, replica_frame(op), to);
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
