// The compute threads of one CPU backend. A worker's step splits its
// convolutions and matrix products over them; OpenBLAS itself runs on one
// thread per call, so BLAS threads never compete with these (or spin in
// sched_yield waiting for work, as OpenBLAS's own pool does).
//
// Idle threads sleep on a condition variable: a parked worker node costs no
// CPU. Waking them costs a few microseconds per parallel_for, against
// milliseconds of work in the calls that use it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace troupe {

class thread_pool {
public:
  /// `threads` in all, counting the caller of parallel_for: threads - 1
  /// are started here.
  explicit thread_pool(int threads);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  /// Runs task(i) for every i in [0, count) on the pool's threads and the
  /// caller's, and returns when all are done. Tasks are handed out one at a
  /// time in order, so give it more tasks than threads when their costs
  /// differ. One call at a time; a task must not call parallel_for.
  void parallel_for(int count, const std::function<void(int)>& task);

private:
  void run_tasks();
  void helper_loop();

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  const std::function<void(int)>* task_ = nullptr;
  int count_ = 0;
  std::atomic<int> next_{0};
  int running_ = 0;         ///< helpers still inside the current job
  uint64_t generation_ = 0; ///< jobs started; helpers wait for a new one
  bool stopping_ = false;
};

/// [begin, end) of part `i` of `parts` near-equal parts of [0, total).
inline std::pair<int64_t, int64_t> split_range(int64_t total, int parts,
                                               int i) {
  return {total * i / parts, total * (i + 1) / parts};
}

} // namespace troupe
