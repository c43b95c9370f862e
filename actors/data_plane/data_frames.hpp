// What both ends of the data plane (actors/data_plane/data_link.hpp) write frames
// with: a frame to send and the writer thread that sends them in order.
// Private to actors/data_plane/data_server.cpp and actors/data_plane/data_client.cpp.
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

} // namespace troupe::data_wire
