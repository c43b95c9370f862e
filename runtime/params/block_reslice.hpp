// A run's dense state cut anew: the images of the shards that hold the
// flat vector in consecutive slices, joined and cut into slices of other
// sizes, so that shards added to or drained from a running cluster take
// it over exactly where the old ones were (actors/chief/chief_reshard.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "caf/expected.hpp"
#include "runtime/params/param_block.hpp"

namespace troupe {

/// The images of `parts` (the old shards' in the order of their slices)
/// cut into one image per entry of `sizes` (floats, in order; they must
/// add up to the parts' values). Values, optimizer slots and a sync
/// update's sum so far are joined and cut; what every shard keeps of its
/// own (version, workers' clocks, applied log, the pushes of the update
/// under way, settings) must agree, since each push reaches every shard,
/// and goes to every new image; the applied logs must hold the same
/// batches, in any order (pushes of two workers may reach two shards in
/// either order), and the first part's order goes on. The workers'
/// clocks must agree where they hold pulls back (`clocks_matter`: ssp);
/// elsewhere they count accepted pushes, which a sync shard may count
/// differently (a backup worker's push in time for one shard's update
/// and stale for another's), and the first part's go on. The counters and the
/// staleness mean come from the first part.
///
/// errc::invalid_argument names what disagrees (e.g. the versions of a
/// sync run in which one shard's replica took over an update behind);
/// errc::wrong_size when the sizes do not add up.
caf::expected<std::vector<block_image>>
reslice(const std::vector<block_image>& parts, const std::vector<size_t>& sizes,
        bool clocks_matter = true);

} // namespace troupe
