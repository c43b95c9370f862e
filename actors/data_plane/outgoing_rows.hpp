// What a worker's row requests must be to leave for a shard, and their
// frames. The shard's end reads a frame's rows by the widths it declares:
// a request that does not fit them would lose the stream, so the client
// refuses it here with an error naming what is wrong, and it never leaves.
#pragma once

#include <cstdint>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/data_plane/data_frames.hpp"

namespace troupe::data_wire {

/// One part of a row_pulls request: its table, and the floats of its rows.
struct row_part {
  int32_t table = 0;
  uint64_t floats = 0;
};

/// The width of table `t` of a shard whose tables are `row_dims` wide; 0
/// when it has no such table.
uint64_t dim_of(const std::vector<int>& row_dims, int32_t t);

/// The error for a request to table `t`, which shard `shard` lacks.
caf::error no_table(int32_t shard, const std::vector<int>& row_dims, int32_t t);

/// The frame of row push `p` for shard `shard`, whose tables are
/// `row_dims` wide, or what keeps it from leaving.
caf::expected<outgoing>
row_push_frame(int32_t shard, const std::vector<int>& row_dims, row_push& p);

/// The parts of row pulls `r` for shard `shard`, or why they cannot go:
/// none, a table the shard lacks, more parts or rows than a frame holds,
/// or parts that differ in what the frame's header holds once for all.
caf::expected<std::vector<row_part>>
row_pulls_parts(int32_t shard, const std::vector<int>& row_dims,
                const row_requests& r);

/// Why row pushes `p` for shard `shard` cannot go: as row_pulls_parts,
/// and each part as row_push_frame checks it.
caf::error check_row_pushes(int32_t shard, const std::vector<int>& row_dims,
                            row_pushes& p);

/// The frame of replica op `op`: its CAF binary form.
caf::expected<outgoing> replica_frame(const replica_op& op);

} // namespace troupe::data_wire
