// Host <-> device copies through page-locked (pinned) staging slots, so
// that every copy is a DMA on the backend's stream and an upload returns
// before it is done.
#pragma once

#include "runtime/base/build_config.hpp"
#if !TROUPE_HAVE_CUDA
#error "gpu/ is built only with CUDA (TROUPE_HAVE_CUDA)"
#endif

#include <cstddef>
#include <functional>
#include <vector>

#include <cuda_runtime.h>

namespace troupe::gpu {

/// A ring of `slots` pinned buffers of `slot_bytes` each. Not thread-safe:
/// one per backend, which one actor uses at a time.
///
/// Why a ring and not cudaHostRegister on the caller's buffers: parameters
/// arrive in buffers CAF deserialised (pooled, owned elsewhere), and a
/// registration costs more than a memcpy of a slice. Copying into a slot
/// lets the caller reuse its buffer at once while the DMA runs.
class pinned_ring {
public:
  /// Wraps each DMA that the ring enqueues, so the backend can time it.
  using dma_wrapper = std::function<void(const std::function<void()>&)>;

  /// Throws backend_error when pinned memory or events cannot be had.
  pinned_ring(size_t slot_bytes, int slots);
  ~pinned_ring();
  pinned_ring(const pinned_ring&) = delete;
  pinned_ring& operator=(const pinned_ring&) = delete;

  /// Copies src into slots and enqueues the DMAs to dst on `stream`;
  /// returns once src has been read, usually before the DMAs are done.
  /// Waits only when every slot still has a DMA in flight.
  void upload(void* dst, const void* src, size_t bytes, cudaStream_t stream,
              const dma_wrapper& wrap);

  /// Enqueues DMAs from src (after everything already on `stream`) and
  /// returns when all of dst is written.
  void download(void* dst, const void* src, size_t bytes, cudaStream_t stream,
                const dma_wrapper& wrap);

private:
  struct slot {
    void* host = nullptr;
    cudaEvent_t done = nullptr; ///< recorded after the slot's last DMA
  };
  slot& next_slot();

  size_t slot_bytes_;
  std::vector<slot> slots_;
  size_t next_ = 0;
};

} // namespace troupe::gpu
