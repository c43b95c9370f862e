// The JSON of the chief's cluster view (actors/protocol/shell_protocol.hpp),
// one shape for every reader: troupe-shell's --json, which scripts and the
// tests read, and the metrics port's /api/ views. A value not known yet is
// null, never a -1 a script could average in.
#pragma once

// GCC 12 reports a false -Warray-bounds inside nlohmann::json (at -O2).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#include <nlohmann/json.hpp>
#pragma GCC diagnostic pop

#include "actors/protocol/shell_protocol.hpp"
#include "caf/expected.hpp"

namespace troupe {

/// The run: its name, identity, mode, progress, rates, loss and accuracy,
/// state, recoveries, last checkpoint and export, and followed stream.
nlohmann::json run_json(const run_view& r);

/// Every node: address, state, roles, and its process as its agent said.
nlohmann::json nodes_json(const cluster_view& v);

nlohmann::json worker_json(const worker_view& w);
nlohmann::json shard_json(const shard_view& s);

/// {"run": ..., "actors": [chief, feeder, shards..., workers...]}.
nlohmann::json status_json(const cluster_view& v);

/// What `inspect` shows of one actor; errc::invalid_argument for one the
/// view lacks ("no shard 7 (shards: 0-1)").
caf::expected<nlohmann::json> inspect_json(const actor_ref& a,
                                           const cluster_view& v);

} // namespace troupe
