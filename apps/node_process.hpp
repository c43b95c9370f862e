// The parts of troupe-node that run one process of a multi-process
// cluster: a member node (shards and workers placed there by the cluster
// file) and a node joining a running cluster with extra workers.
#pragma once

#include <string>

#include "runtime/config.hpp"

namespace troupe {

/// Starts this process's agent on `node`'s address, registers with the
/// chief (waiting up to the config's node_timeout_s for it) and serves
/// until the run ends. Returns the exit code.
int run_member_node(const run_config& cfg, const std::string& node);

/// Connects to the chief at `chief_address` (HOST:PORT) within
/// `timeout_s`, takes the run config from it and adds `workers` workers in
/// this process. Returns the exit code.
int run_joining_node(const std::string& chief_address, int workers,
                     const std::string& name, int threads, double timeout_s);

} // namespace troupe
