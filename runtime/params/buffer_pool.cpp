#include "runtime/params/buffer_pool.hpp"

#include <chrono>
#include <limits>
#include <malloc.h>
#include <map>
#include <mutex>
#include <pthread.h>
#include <signal.h>
#include <thread>

namespace troupe {

namespace {

/// How often keep_freed_memory's thread gives free pages back.
constexpr auto trim_period = std::chrono::seconds(30);

/// Free buffers by size; at most `per_size` of each and `max_bytes` in all,
/// so an idle process holds a bounded amount.
class pool {
public:
  static pool& instance() {
    static pool* p = new pool; // never destroyed: owners may outlive main
    return *p;
  }

  std::vector<float>* take(size_t n) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = free_.find(n);
    if (it == free_.end() || it->second.empty())
      return nullptr;
    auto* v = it->second.back();
    it->second.pop_back();
    bytes_ -= n * sizeof(float);
    return v;
  }

  void give(std::vector<float>* v) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto bytes = v->size() * sizeof(float);
      auto& list = free_[v->size()];
      if (list.size() < per_size && bytes_ + bytes <= max_bytes) {
        list.push_back(v);
        bytes_ += bytes;
        return;
      }
    }
    delete v;
  }

private:
  static constexpr size_t per_size = 4;
  static constexpr size_t max_bytes = size_t{1} << 30;
  std::mutex mtx_;
  std::map<size_t, std::vector<std::vector<float>*>> free_;
  size_t bytes_ = 0;
};

} // namespace

std::shared_ptr<std::vector<float>> pooled_floats(size_t n) {
  if (n < pool_min_floats)
    return std::make_shared<std::vector<float>>(n);
  auto* v = pool::instance().take(n);
  if (v == nullptr)
    v = new std::vector<float>(n);
  return {v, [](std::vector<float>* p) { pool::instance().give(p); }};
}

void keep_freed_memory() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  // Once in a while the whole free pages inside the heap go back to the
  // kernel, so that a long-running process's resident memory follows what
  // it holds rather than the fragments of all it ever allocated: a worker
  // node's heap crept from 5 to 10.5 MB in an hour of kills and cut links
  // with at most 2.5 MB live (heaptrack), and a shard node kept the peak
  // of every applied log it held. A buffer freed and taken again within
  // the period is never given back, so the faults it saves stay saved.
  static std::once_flag trimmer;
  std::call_once(trimmer, [] {
    // Started with every signal blocked, so that SIGINT and SIGTERM still
    // reach the thread that waits for them (troupe-node's stop_signals).
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    std::thread([] {
      pthread_setname_np(pthread_self(), "troupe.trim");
      for (;;) {
        std::this_thread::sleep_for(trim_period);
        malloc_trim(0);
      }
    }).detach();
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  });
}

} // namespace troupe
