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

/// Keeps freed memory in the process for the next allocation: one malloc
/// arena, never trimmed, no mmap'd blocks. troupe-node calls it first thing
/// in main, and init_config again for every other actor system (arenas
/// made before the call stay, and threads keep being spread over them).
/// Why:
/// - CAF allocates fresh buffers for every large message; glibc serves
///   blocks over its mmap threshold with mmap and unmaps them on free, so
///   each 100 MB pull paid for clearing 25,000 fresh pages (perf: most of
///   the time in clear_page_erms).
/// - With an arena per thread, small blocks allocated by one thread (CAF's
///   clock thread for request timeouts, a worker for its callbacks) and
///   freed by another never return to the first one's arena, so its heap
///   creeps forward a page at a time: 0.1-0.5 minor faults per step in a
///   running cluster (perf record -e page-faults: sysmalloc under
///   thread_safe_actor_clock and the worker's pulls). With one arena the
///   same run makes none (scripts/bench-scaling.sh), and ran 3-5% faster.
/// The price, a process that keeps its peak heap (and its fragments) until
/// it exits, is paid back every 30 s: a thread of its own ("troupe.trim")
/// gives the heap's whole free pages back (malloc_trim), so that resident
/// memory follows what the process holds. CAF 0.17 keeps every request's
/// timeout in its clock until it fires, answered or not: the workers'
/// requests of every step carry none (actors/worker/worker.cpp).
void keep_freed_memory();

/// Buffers smaller than this (256 KiB) are not pooled: malloc keeps such
/// chunks mapped on its own.
inline constexpr size_t pool_min_floats = size_t{1} << 16;

} // namespace troupe
