// The parameter shard actor: a thin shell around runtime/params/param_block and,
// when the model has embedding tables, this shard's rows of each
// (runtime/sparse/sparse_table; in sync mode held for their update by
// runtime/sparse/sync_rows).
//
// States: one. It accepts joins, pulls, pushes, snapshots, restores, stats,
// adoption by a new chief and a checkpoint's forget at any time. A pull that the consistency mode cannot answer yet (sync:
// version not reached; ssp: the worker too far ahead) is parked and answered
// by the push that makes it ready, or, once it has waited `hold` (a pause,
// a worker waiting for its lost node), with "ask again" well within the
// worker's request timeout: a waiting worker costs one small message per
// `hold`, never a stream of pulls.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "actors/protocol/protocol.hpp"
#include "runtime/params/param_block.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/sync_rows.hpp"

namespace troupe {

struct shard_options {
  int32_t id = 0;
  param_block::options block;
  std::vector<float> initial; ///< this shard's slice of the parameters
  /// The run's embedding tables: this shard holds the rows that
  /// shard_of_row places on it, of every table, made as they are touched
  /// (or all at once for a fixed vocabulary: the caller gives each shard a
  /// table of its own rows then), updated by `sparse`.
  std::vector<embedding_table_config> tables;
  sparse_optimizer_config sparse;
  /// How long a pull that is not ready may be parked before "ask again";
  /// keep it well below the workers' request timeout.
  caf::timespan hold = std::chrono::seconds(10);
};

struct shard_state {
  static inline const char* name = "shard";
  struct parked_pull {
    caf::typed_response_promise<float_block> promise;
    int32_t worker;
    int64_t min_version;
    caf::actor_clock::time_point since; /// on the actor clock (a test drives it)
  };
  int32_t id = 0;
  std::unique_ptr<param_block> block;
  std::vector<std::unique_ptr<sparse_table>> tables;
  std::vector<parked_pull> parked; ///< in arrival order
  caf::timespan hold{};
  bool expiry_pending = false; ///< an expire message is on its way
  int64_t ssp_pulls = 0;    ///< ssp: worker pulls answered
  int64_t ssp_max_lead = 0; ///< ssp: widest clock lead at an answered pull
  /// Parameter bytes sent in answered pulls, gradient bytes received in
  /// pushes (whatever became of them): what the shard moves, in values.
  int64_t pulled_bytes = 0, pushed_bytes = 0;
  /// sync: each worker's row push, held until the update its dense push
  /// of the same tag joins is applied, or until that push is refused or
  /// stale.
  sync_rows sync;
};

/// The shard as it runs: its interface, and its own timer, which answers
/// pulls held for their bound with "ask again". Others hold a shard_actor.
using shard_self_actor = shard_actor::extend<caf::reacts_to<expire_atom>>;

shard_self_actor::behavior_type
shard_impl(shard_self_actor::stateful_pointer<shard_state> self,
           shard_options opts);

} // namespace troupe
