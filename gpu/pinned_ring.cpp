#include "gpu/pinned_ring.hpp"

#include <cstring>
#include <deque>

#include "gpu/cuda_check.hpp"

namespace troupe::gpu {

pinned_ring::pinned_ring(size_t slot_bytes, int slots)
  : slot_bytes_(slot_bytes) {
  try {
    for (int i = 0; i < slots; ++i) {
      slot s;
      TROUPE_CUDA(cudaMallocHost(&s.host, slot_bytes));
      slots_.push_back(s);
      TROUPE_CUDA(
        cudaEventCreateWithFlags(&slots_.back().done, cudaEventDisableTiming));
    }
  } catch (...) {
    for (auto& s : slots_) {
      if (s.done != nullptr)
        cudaEventDestroy(s.done);
      cudaFreeHost(s.host);
    }
    throw;
  }
}

pinned_ring::~pinned_ring() {
  // A failed device leaves nothing to do about errors here.
  for (auto& s : slots_) {
    cudaEventSynchronize(s.done);
    cudaEventDestroy(s.done);
    cudaFreeHost(s.host);
  }
}

pinned_ring::slot& pinned_ring::next_slot() {
  slot& s = slots_[next_];
  next_ = (next_ + 1) % slots_.size();
  // An event never recorded counts as complete.
  TROUPE_CUDA(cudaEventSynchronize(s.done));
  return s;
}

void pinned_ring::upload(void* dst, const void* src, size_t bytes,
                         cudaStream_t stream, const dma_wrapper& wrap) {
  auto* to = static_cast<char*>(dst);
  auto* from = static_cast<const char*>(src);
  for (size_t done = 0; done < bytes;) {
    size_t n = std::min(slot_bytes_, bytes - done);
    slot& s = next_slot();
    std::memcpy(s.host, from + done, n);
    wrap([&] {
      TROUPE_CUDA(
        cudaMemcpyAsync(to + done, s.host, n, cudaMemcpyHostToDevice, stream));
    });
    TROUPE_CUDA(cudaEventRecord(s.done, stream));
    done += n;
  }
}

void pinned_ring::download(void* dst, const void* src, size_t bytes,
                           cudaStream_t stream, const dma_wrapper& wrap) {
  auto* to = static_cast<char*>(dst);
  auto* from = static_cast<const char*>(src);
  // Up to every slot in flight; the host copies chunk i out while the DMAs
  // of the chunks after it run.
  struct chunk {
    slot* s;
    size_t offset, n;
  };
  std::deque<chunk> in_flight;
  size_t issued = 0;
  while (issued < bytes || !in_flight.empty()) {
    while (issued < bytes && in_flight.size() < slots_.size()) {
      size_t n = std::min(slot_bytes_, bytes - issued);
      slot& s = next_slot();
      wrap([&] {
        TROUPE_CUDA(cudaMemcpyAsync(s.host, from + issued, n,
                                    cudaMemcpyDeviceToHost, stream));
      });
      TROUPE_CUDA(cudaEventRecord(s.done, stream));
      in_flight.push_back({&s, issued, n});
      issued += n;
    }
    chunk c = in_flight.front();
    in_flight.pop_front();
    TROUPE_CUDA(cudaEventSynchronize(c.s->done));
    std::memcpy(to + c.offset, c.s->host, c.n);
  }
}

} // namespace troupe::gpu
