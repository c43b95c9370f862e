// What both ends of the data plane (actors/data_plane/data_link.hpp) write
// frames with: a frame to send, the writer thread that sends them in order,
// and each message's frame form, made and read back in one place. Private
// to actors/data_plane/data_server.cpp and data_client.cpp.
#pragma once

#include <condition_variable>
#include <cstring>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/data_plane/data_link.hpp"
#include "actors/net/link_socket.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::data_wire {

// -- writing frames -------------------------------------------------------------

/// A frame to send; the payload stays alive through `keep` until written.
struct outgoing {
  data_frame head;
  std::shared_ptr<const std::vector<float>> keep;
  const float* data = nullptr;
  size_t floats = 0; ///< at `data`
  std::vector<uint64_t> ids; ///< row_pull, row_push: sent before the floats
  std::string text;
  size_t done = 0; ///< bytes of header and payload written so far
  /// The header followed by the ids, built at the first write (the header
  /// gets its request id after the frame is made).
  std::string prefix;

  size_t bytes() const {
    return text.size() + ids.size() * sizeof(uint64_t)
           + floats * sizeof(float);
  }
};

/// Writes (the rest of) one frame; see link_socket::write.
inline written write_frame(link_socket& sock, outgoing& o, bool wait) {
  const void* head = &o.head;
  size_t head_len = sizeof(o.head);
  if (!o.ids.empty()) {
    // Copying the ids costs an eighth of a dim-16 push's bytes and keeps
    // link_socket's one-header-one-body write.
    if (o.prefix.empty()) {
      o.prefix.resize(sizeof(o.head) + o.ids.size() * sizeof(uint64_t));
      std::memcpy(o.prefix.data(), &o.head, sizeof(o.head));
      std::memcpy(o.prefix.data() + sizeof(o.head), o.ids.data(),
                  o.ids.size() * sizeof(uint64_t));
    }
    head = o.prefix.data();
    head_len = o.prefix.size();
  }
  if (!o.text.empty())
    return sock.write(head, head_len, o.text.data(), o.text.size(), o.done,
                      wait);
  return sock.write(head, head_len, o.data, o.floats * sizeof(float), o.done,
                    wait);
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
    auto bytes = o.bytes();
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

// -- each message's frame, written once for both ends ---------------------------
//
// The frame form of every message the data plane carries: the header's
// fields and the payload, next to the reading of them back. The client
// makes the requests and reads the replies; the server reads the requests
// and makes the replies. A request's id and shard are set when the stub
// sends it; a reply echoes both. The same messages' BASP form is their
// inspect() in protocol.hpp.

/// pull_atom(worker, min_version): no payload.
inline outgoing pull_frame(int32_t worker, int64_t min_version) {
  outgoing o;
  o.head.op = data_frame::pull;
  o.head.worker = worker;
  o.head.tag = min_version;
  return o;
}

/// A pull as the server's relay takes it.
struct pull_request {
  int32_t shard = 0;
  int32_t worker = 0;
  int64_t min_version = 0;
};

inline pull_request pull_of(const data_frame& f) {
  return {f.shard, f.worker, f.tag};
}

/// gradient_push: its floats follow, written from the push's own buffer.
inline outgoing push_frame(gradient_push& g) {
  outgoing o;
  o.head.op = data_frame::push;
  o.head.worker = g.worker;
  o.head.tag = g.tag;
  o.head.batch = g.batch;
  o.head.count = g.size;
  o.data = g.data();
  o.floats = g.size;
  o.keep = std::move(g.buffer);
  return o;
}

/// The push of header `f`, whose `f.count` floats were read into `values`.
inline gradient_push push_of(const data_frame& f,
                             std::shared_ptr<std::vector<float>> values) {
  gradient_push g;
  g.shard = f.shard;
  g.worker = f.worker;
  g.tag = f.tag;
  g.batch = f.batch;
  g.size = f.count;
  g.buffer = std::move(values);
  return g;
}

/// row_request: its ids follow; peek travels as the flag.
inline outgoing row_pull_frame(row_request& r) {
  outgoing o;
  o.head.op = data_frame::row_pull;
  o.head.flag = r.peek ? 1 : 0;
  o.head.table = static_cast<uint16_t>(r.table);
  o.head.worker = r.worker;
  o.head.count = r.ids.size();
  o.ids = std::move(r.ids);
  return o;
}

inline row_request row_pull_of(const data_frame& f,
                               std::vector<uint64_t> ids) {
  return row_request{f.shard, f.table, f.worker, std::move(ids),
                     f.flag != 0};
}

/// row_push: its ids follow, then ids x dim floats.
inline outgoing row_push_frame(row_push& p) {
  auto floats = p.grads ? p.grads->size() : 0;
  outgoing o;
  o.head.op = data_frame::row_push;
  o.head.table = static_cast<uint16_t>(p.table);
  o.head.worker = p.worker;
  o.head.batch = p.batch;
  o.head.tag = p.tag;
  o.head.count = p.ids.size();
  o.ids = std::move(p.ids);
  o.data = floats > 0 ? p.grads->data() : nullptr;
  o.floats = floats;
  o.keep = std::move(p.grads);
  return o;
}

inline row_push row_push_of(const data_frame& f, std::vector<uint64_t> ids,
                            std::shared_ptr<std::vector<float>> grads) {
  return row_push{f.shard, f.table, f.worker, f.batch,
                  f.tag,   std::move(ids), std::move(grads)};
}

/// A reply of operation `op` whose payload is `values`, written from the
/// shard's own buffer.
inline outgoing float_reply(uint8_t op, uint64_t id, int32_t shard,
                            std::shared_ptr<const std::vector<float>> values) {
  outgoing o;
  o.head.op = op;
  o.head.id = id;
  o.head.shard = shard;
  o.head.count = values ? values->size() : 0;
  o.data = values ? values->data() : nullptr;
  o.floats = o.head.count;
  o.keep = std::move(values);
  return o;
}

/// float_block, the reply to a pull: the version in the tag, the values
/// after the header (none with "ask again").
inline outgoing values_frame(uint64_t id, int32_t shard, float_block& b) {
  auto o = float_reply(data_frame::values, id, shard, std::move(b.values));
  o.head.tag = b.version;
  return o;
}

inline float_block values_of(const data_frame& f,
                             std::shared_ptr<std::vector<float>> values) {
  return float_block{f.shard, f.tag, std::move(values)};
}

/// row_block, the reply to a row pull: the rows' floats after the header.
inline outgoing rows_frame(uint64_t id, int32_t shard, row_block& b) {
  auto o = float_reply(data_frame::rows, id, shard, std::move(b.values));
  o.head.table = static_cast<uint16_t>(b.table);
  return o;
}

inline row_block rows_of(const data_frame& f,
                         std::shared_ptr<std::vector<float>> values) {
  return row_block{f.shard, f.table, std::move(values)};
}

/// push_ack, the reply to a push or a row push: the version in the tag,
/// staleness in the flag.
inline outgoing ack_frame(uint64_t id, int32_t shard, const push_ack& a) {
  outgoing o;
  o.head.op = data_frame::ack;
  o.head.id = id;
  o.head.shard = shard;
  o.head.tag = a.version;
  o.head.flag = a.stale ? 1 : 0;
  return o;
}

inline push_ack ack_of(const data_frame& f) {
  return push_ack{f.tag, f.flag != 0};
}

/// An error, the reply to anything: troupe's error code in the flag (0:
/// another category), its text after the header.
inline outgoing error_frame(uint64_t id, int32_t shard,
                            const caf::error& err) {
  outgoing o;
  o.head.op = data_frame::error;
  o.head.id = id;
  o.head.shard = shard;
  o.head.flag = err.category() == caf::atom("troupe") ? err.code() : 0;
  o.text = describe(err);
  o.head.count = o.text.size();
  return o;
}

/// The error of header `f` with its `text`.
inline caf::error error_of(const data_frame& f, std::string text) {
  return f.flag > 0 ? make_error(static_cast<errc>(f.flag), std::move(text))
                    : make_error(errc::actor_down, std::move(text));
}

} // namespace troupe::data_wire
