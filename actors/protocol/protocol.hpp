// The whole message protocol: every role's interface and messages. Each
// role's header holds its typed_actor, its messages and their type IDs
// (ids.hpp: the atoms and the blocks' ranges); a file that talks to one
// role includes that role's header alone.
#pragma once

#include "actors/protocol/chief_protocol.hpp"
#include "actors/protocol/feeder_protocol.hpp"
#include "actors/protocol/node_agent_protocol.hpp"
#include "actors/protocol/replica_protocol.hpp"
#include "actors/protocol/shard_data_messages.hpp"
#include "actors/protocol/shard_protocol.hpp"
#include "actors/protocol/shell_protocol.hpp"
#include "actors/protocol/worker_protocol.hpp"
