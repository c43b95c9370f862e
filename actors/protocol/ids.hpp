// The protocol's vocabulary: every atom troupe's messages start with, and
// where each role's type IDs begin. Each role's header (shard_protocol.hpp,
// feeder_protocol.hpp, ...) declares its messages and its typed_actor, and
// registers their types in a type-ID block of its own, in the range given
// here; system_config.cpp adds every block to an actor system (and checks
// that no block runs into the next). Nothing else defines atoms or type
// IDs, so moving to CAF 0.18+ is a change to these headers. CAF's block
// macros end without a semicolon, which makes clang-format indent what
// follows them: each block stands between "clang-format off" and "on".
#pragma once

#include "caf/type_id.hpp"

namespace troupe::type_ids {

/// The first type ID of each role's block, 32 apart: a block holds fewer.
constexpr caf::type_id_t shard_data = caf::first_custom_type_id;
constexpr caf::type_id_t replica = shard_data + 32;
constexpr caf::type_id_t shard = replica + 32;
constexpr caf::type_id_t feeder = shard + 32;
constexpr caf::type_id_t worker = feeder + 32;
constexpr caf::type_id_t node_agent = worker + 32;
constexpr caf::type_id_t chief = node_agent + 32;
constexpr caf::type_id_t end = chief + 32;

} // namespace troupe::type_ids

CAF_ADD_ATOM(troupe, troupe, pull_atom, "pull")
CAF_ADD_ATOM(troupe, troupe, push_atom, "push")
CAF_ADD_ATOM(troupe, troupe, join_atom, "join")
CAF_ADD_ATOM(troupe, troupe, leave_atom, "leave")
CAF_ADD_ATOM(troupe, troupe, lease_atom, "lease")
CAF_ADD_ATOM(troupe, troupe, ack_atom, "ack")
CAF_ADD_ATOM(troupe, troupe, requeue_atom, "requeue")
CAF_ADD_ATOM(troupe, troupe, pause_atom, "pause")
CAF_ADD_ATOM(troupe, troupe, resume_atom, "resume")
CAF_ADD_ATOM(troupe, troupe, finish_atom, "finish")
CAF_ADD_ATOM(troupe, troupe, snapshot_atom, "snapshot")
CAF_ADD_ATOM(troupe, troupe, restore_atom, "restore")
CAF_ADD_ATOM(troupe, troupe, stats_atom, "stats")
CAF_ADD_ATOM(troupe, troupe, report_atom, "report")
CAF_ADD_ATOM(troupe, troupe, step_atom, "step")
CAF_ADD_ATOM(troupe, troupe, run_atom, "run")
CAF_ADD_ATOM(troupe, troupe, place_atom, "place")
CAF_ADD_ATOM(troupe, troupe, register_atom, "register")
CAF_ADD_ATOM(troupe, troupe, tune_atom, "tune")
CAF_ADD_ATOM(troupe, troupe, deadline_atom, "deadline")
CAF_ADD_ATOM(troupe, troupe, expire_atom, "expire")
CAF_ADD_ATOM(troupe, troupe, data_atom, "data")
CAF_ADD_ATOM(troupe, troupe, stop_atom, "stop")
CAF_ADD_ATOM(troupe, troupe, adopt_atom, "adopt")
CAF_ADD_ATOM(troupe, troupe, skip_atom, "skip")
CAF_ADD_ATOM(troupe, troupe, forget_atom, "forget")
CAF_ADD_ATOM(troupe, troupe, kill_atom, "kill")
CAF_ADD_ATOM(troupe, troupe, who_atom, "who")
CAF_ADD_ATOM(troupe, troupe, replicate_atom, "replicate")
CAF_ADD_ATOM(troupe, troupe, promote_atom, "promote")
CAF_ADD_ATOM(troupe, troupe, image_atom, "image")
CAF_ADD_ATOM(troupe, troupe, reshard_atom, "reshard")
CAF_ADD_ATOM(troupe, troupe, grow_atom, "grow")
CAF_ADD_ATOM(troupe, troupe, drain_atom, "drain")
CAF_ADD_ATOM(troupe, troupe, counts_atom, "counts")
CAF_ADD_ATOM(troupe, troupe, export_atom, "export")
CAF_ADD_ATOM(troupe, troupe, follow_atom, "follow")
CAF_ADD_ATOM(troupe, troupe, keep_atom, "keep")
