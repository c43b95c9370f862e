// What both ends of the data plane (actors/data_plane/data_link.hpp) write
// frames with: a frame to send, the writer thread that sends them in order,
// and each message's frame form, derived from its wire form
// (actors/protocol/shard_data_messages.hpp).
// Private to actors/data_plane/data_server.cpp and data_client.cpp.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "actors/data_plane/data_link.hpp"
#include "actors/net/link_socket.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::data_wire {

// -- writing frames -----------------------------------------------------------

/// A frame to send; the payload stays alive through `keep` until written.
struct outgoing {
  data_frame head;
  std::shared_ptr<const std::vector<float>> keep;
  const float* data = nullptr;
  size_t floats = 0;         ///< at `data`
  std::vector<uint64_t> ids; ///< row_pull, row_push: sent before the floats
  std::string text;
  size_t done = 0; ///< bytes of header and payload written so far
  /// The header followed by the ids, built at the first write (the header
  /// gets its request id after the frame is made).
  std::string prefix;

  size_t bytes() const {
    return text.size() + ids.size() * sizeof(uint64_t) + floats * sizeof(float);
  }
};

/// Writes (the rest of) one frame; see link_socket::write.
inline written write_frame(byte_link& sock, outgoing& o, bool wait) {
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
/// socket. Frames posted before start() wait for it. A frame of up to
/// inline_bytes posted while nothing is queued or being written is
/// written at once by the caller, as far as the socket takes it without
/// waiting: a request, an ack, a gradient or a model's values then cost
/// no thread hand-off (it is what keeps a 40 KB round trip as fast as on
/// CAF's own connection), and an actor never waits for a peer that does
/// not read; the thread writes the rest, and every larger frame.
class frame_writer {
public:
  /// A shared-memory ring's room (shared_link::default_ring_bytes): a
  /// frame that fits is most often taken whole. Raised from 64 KiB, it
  /// took the writer thread's hand-off off both large frames of a step
  /// (the worker's push, the shard's values): 4-14% more samples/s across
  /// processes in scripts/bench-nodes.sh's clusters of 1 and 2 workers,
  /// 2% at 4 workers on 1 shard, against the build before, alternating
  /// (docs/benchmarks.md). A shard's actor then copies its answers
  /// itself, one worker's after another, where each connection's thread
  /// copied its own; on 2 cores that measured no slower.
  static constexpr size_t inline_bytes = 2 * 1024 * 1024;

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
      byte_link* sock = sock_.get(); // kept while busy_ (fail, stop)
      guard.unlock();
      auto result = write_frame(*sock, o, false);
      guard.lock();
      busy_ = false;
      if (result == written::failed)
        fail();
      else if (broken_ || joined_) // ended while this frame was written
        sock_.reset();
      else if (result == written::some) // the thread writes the rest first
        queue_.push_front(std::move(o));
      // Only when there is work for the thread (frames queued while this
      // one was written, or its rest) or an end: waking it to find nothing
      // costs two context switches on every request.
      if (broken_ || !queue_.empty())
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

  void start(std::shared_ptr<byte_link> sock) {
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
    std::lock_guard<std::mutex> guard{mtx_};
    joined_ = true;
    if (!busy_) // else post() lets go once its frame is written
      sock_.reset();
  }

  /// The connection ended (its reader saw it): drop what is queued and
  /// let go of the link, so that a shared segment is unmapped now, not
  /// when the last reply sink holding this writer goes.
  void break_link() {
    std::lock_guard<std::mutex> guard{mtx_};
    fail();
    cv_.notify_one();
  }

private:
  /// The socket failed: drop what is queued and the link (after the write
  /// in progress, if any: a writer reaches the link through sock_ without a
  /// reference of its own, so that a small frame costs no reference count);
  /// the reader then sees the broken connection and ends the session.
  /// Called under the lock.
  void fail() {
    broken_ = true;
    queue_.clear();
    if (sock_)
      sock_->shutdown();
    if (!busy_)
      sock_.reset();
  }

  void run() {
    for (;;) {
      outgoing o;
      byte_link* sock = nullptr; // kept while busy_ (fail, stop)
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
        sock = sock_.get();
      }
      bool ok = write_frame(*sock, o, true) == written::all;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        busy_ = false;
        if (!ok)
          fail();
        else if (broken_) // broken while this frame was written
          sock_.reset();
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
  std::shared_ptr<byte_link> sock_;
  bool busy_ = false;   ///< a frame is being written
  bool joined_ = false; ///< stop() has joined the thread
  std::function<void()> progress_;
  bool stopping_ = false;
  bool broken_ = false;
  std::thread thread_;
};

// -- each message's frame, derived from its wire form -------------------------
//
// The frame form of every message the data plane carries. A data message's
// fields and payload are those of its description in
// shard_data_messages.hpp (the same one BASP's form comes from): its
// fields go into the header slots the description names, its payload
// after the header. What is written here is only the op code of each
// message, as a type ID is on BASP. The client makes the requests and
// reads the replies; the server reads the requests and makes the replies. A
// request's id and shard are set when the stub sends it; a reply echoes both.

/// The op code of each described message.
template <class Message>
constexpr uint8_t op_of = 0;
template <>
inline constexpr uint8_t op_of<gradient_push> = data_frame::push;
template <>
inline constexpr uint8_t op_of<float_block> = data_frame::values;
template <>
inline constexpr uint8_t op_of<push_ack> = data_frame::ack;
template <>
inline constexpr uint8_t op_of<row_request> = data_frame::row_pull;
template <>
inline constexpr uint8_t op_of<row_push> = data_frame::row_push;
template <>
inline constexpr uint8_t op_of<row_block> = data_frame::rows;

/// The header field that holds slot `Slot`.
template <wire::slot Slot, class Header>
auto& slot_of(Header& h) {
  using wire::slot;
  if constexpr (Slot == slot::shard)
    return h.shard;
  else if constexpr (Slot == slot::worker)
    return h.worker;
  else if constexpr (Slot == slot::tag)
    return h.tag;
  else if constexpr (Slot == slot::batch)
    return h.batch;
  else if constexpr (Slot == slot::table)
    return h.table;
  else
    return h.flag;
}

/// Puts a description into a frame. Its payload moves into the frame
/// (written from the message's own buffer, kept alive until written);
/// `count` is the number of row ids when there are any, else of floats.
struct frame_maker {
  outgoing& o;

  template <class... Parts>
  void operator()(const char*, Parts... parts) {
    (put(parts), ...);
  }

  template <wire::slot Slot, class T>
  void put(wire::field<Slot, T> p) {
    auto& to = slot_of<Slot>(o.head);
    to = static_cast<std::remove_reference_t<decltype(to)>>(p.value);
  }
  void put(wire::floats p) {
    o.floats = p.values ? p.values->size() : 0;
    o.data = o.floats > 0 ? p.values->data() : nullptr;
    o.keep = std::move(p.values);
    if (o.ids.empty())
      o.head.count = o.floats;
  }
  void put(wire::float_slice p) {
    o.data = p.buffer ? p.buffer->data() + p.offset : nullptr;
    o.floats = p.size;
    o.keep = std::move(p.buffer);
    o.head.count = p.size;
  }
  void put(wire::row_ids p) {
    o.head.count = p.values.size();
    o.ids = std::move(p.values);
  }
};

/// Reads a description back from a header and the payload read after it.
struct frame_reader {
  const data_frame& f;
  std::vector<uint64_t>& ids;
  std::shared_ptr<std::vector<float>>& floats;

  template <class... Parts>
  void operator()(const char*, Parts... parts) {
    (get(parts), ...);
  }

  template <wire::slot Slot, class T>
  void get(wire::field<Slot, T> p) {
    p.value = static_cast<T>(slot_of<Slot>(f));
  }
  void get(wire::floats p) { p.values = std::move(floats); }
  void get(wire::float_slice p) {
    p.offset = 0;
    p.size = floats ? floats->size() : 0;
    p.buffer = std::move(floats);
  }
  void get(wire::row_ids p) { p.values = std::move(ids); }
};

/// The frame of request `m`, which gives up its payload to it.
template <class Message>
outgoing request_frame(Message& m) {
  outgoing o;
  o.head.op = op_of<Message>;
  frame_maker w{o};
  wire_form(w, m);
  return o;
}

/// The frame of reply `m` to request `id` for shard `shard`.
template <class Message>
outgoing reply_frame(uint64_t id, int32_t shard, Message& m) {
  auto o = request_frame(m);
  o.head.id = id;
  o.head.shard = shard;
  return o;
}

/// The message of header `f`, whose payload was read into `ids` (row
/// pulls and pushes: `f.count` of them) and `floats` (pushes, values,
/// rows).
template <class Message>
Message message_of(const data_frame& f, std::vector<uint64_t> ids = {},
                   std::shared_ptr<std::vector<float>> floats = {}) {
  Message m;
  frame_reader r{f, ids, floats};
  wire_form(r, m);
  return m;
}

/// pull_atom(worker, min_version): no payload. A pull is an atom message
/// with its arguments on BASP, which CAF writes; this is its frame.
inline outgoing pull_frame(int32_t worker, int64_t min_version) {
  outgoing o;
  o.head.op = data_frame::pull;
  o.head.worker = worker;
  o.head.tag = min_version;
  return o;
}

/// A pull as the server reads it.
struct pull_request {
  int32_t shard = 0;
  int32_t worker = 0;
  int64_t min_version = 0;
};

inline pull_request pull_of(const data_frame& f) {
  return {f.shard, f.worker, f.tag};
}

/// An error, the reply to anything: troupe's error code in the flag (0:
/// another category), its text after the header.
inline outgoing error_frame(uint64_t id, int32_t shard, const caf::error& err) {
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

// -- several tables' rows in one frame ----------------------------------------
//
// row_requests, row_pushes and row_blocks have no wire form of their own:
// each is a list of single-table messages, and its frame is written here.

/// The frame of parts `parts` (row requests or pushes of one shard, which
/// share their worker, and a push's tag and batch): each part's (table,
/// number of ids), then every part's ids; a push's floats follow them,
/// each part's in order, copied into one buffer (a step's row gradients
/// are a few KB).
template <class Part>
outgoing parts_frame(uint8_t op, std::vector<Part>& parts) {
  outgoing o;
  o.head.op = op;
  o.head.table = static_cast<uint16_t>(parts.size());
  size_t ids = 0;
  for (auto& p : parts)
    ids += p.ids.size();
  o.ids.reserve(2 * parts.size() + ids);
  for (auto& p : parts) {
    o.ids.push_back(static_cast<uint64_t>(p.table));
    o.ids.push_back(p.ids.size());
  }
  for (auto& p : parts)
    o.ids.insert(o.ids.end(), p.ids.begin(), p.ids.end());
  o.head.count = o.ids.size();
  if (!parts.empty())
    o.head.worker = parts.front().worker;
  if constexpr (std::is_same_v<Part, row_request>) {
    o.head.flag = !parts.empty() && parts.front().peek;
  } else {
    size_t floats = 0;
    for (auto& p : parts)
      floats += p.grads ? p.grads->size() : 0;
    auto all = pooled_floats(floats);
    auto at = all->data();
    for (auto& p : parts)
      if (p.grads && !p.grads->empty())
        at = std::copy(p.grads->begin(), p.grads->end(), at);
    o.data = all->data();
    o.floats = floats;
    o.keep = std::move(all);
    if (!parts.empty()) {
      o.head.tag = parts.front().tag;
      o.head.batch = parts.front().batch;
    }
  }
  return o;
}

/// The one rows frame that answers row_pulls request `id`: every part's
/// rows, in order.
inline outgoing rows_frame(uint64_t id, int32_t shard, row_blocks& b) {
  if (b.parts.size() == 1)
    return reply_frame(id, shard, b.parts.front());
  size_t floats = 0;
  for (auto& p : b.parts)
    floats += p.values ? p.values->size() : 0;
  row_block all;
  all.shard = shard;
  auto values = pooled_floats(floats);
  auto at = values->data();
  for (auto& p : b.parts)
    if (p.values && !p.values->empty())
      at = std::copy(p.values->begin(), p.values->end(), at);
  all.values = std::move(values);
  return reply_frame(id, shard, all);
}

} // namespace troupe::data_wire
