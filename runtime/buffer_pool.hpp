// Reuse of large float buffers across messages. On the VMs troupe runs on
// the first touch of a fresh page costs about 13 us (300 MB/s), so a
// 100 MB buffer that is allocated, filled and freed for every pull or push
// spends most of its time in the kernel clearing pages (perf: 69% in
// clear_page_erms for bench-transfer at 100 MB). Buffers from here go back
// to a small free list when their last owner lets go, and the next buffer
// of that size reuses the mapped pages.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace troupe {

/// A buffer of exactly `n` floats whose contents are unspecified (the
/// caller overwrites them all). Below pool_min_floats it is a plain new
/// vector; above, a reused one where the pool has one of that size.
std::shared_ptr<std::vector<float>> pooled_floats(size_t n);

/// Buffers smaller than this (256 KiB) are not pooled: malloc keeps such
/// chunks mapped on its own.
inline constexpr size_t pool_min_floats = size_t{1} << 16;

} // namespace troupe
