#include "runtime/compute/thread_pool.hpp"

namespace troupe {

thread_pool::thread_pool(int threads) {
  for (int i = 1; i < threads; ++i)
    helpers_.emplace_back([this] { helper_loop(); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : helpers_)
    t.join();
}

void thread_pool::run_tasks() {
  for (int i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1))
    (*task_)(i);
}

void thread_pool::parallel_for(int count,
                               const std::function<void(int)>& task) {
  if (helpers_.empty() || count <= 1) {
    for (int i = 0; i < count; ++i)
      task(i);
    return;
  }
  {
    std::lock_guard<std::mutex> guard{mutex_};
    task_ = &task;
    count_ = count;
    next_.store(0);
    running_ = static_cast<int>(helpers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_tasks();
  std::unique_lock<std::mutex> lock{mutex_};
  finished_.wait(lock, [this] { return running_ == 0; });
  task_ = nullptr;
}

void thread_pool::helper_loop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock{mutex_};
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_)
      return;
    seen = generation_;
    lock.unlock();
    run_tasks();
    lock.lock();
    if (--running_ == 0)
      finished_.notify_one();
  }
}

} // namespace troupe
