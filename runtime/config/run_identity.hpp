// What makes two processes parts of the same training run: the settings
// that change what is trained (model, data, optimizer, batch, seeds,
// consistency mode, the cluster's nodes), as "JSON path = value" lines, and
// their digest. The chief compares a registering node's lines with its own
// and names the keys that differ; checkpoints record the digest.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/config.hpp"

namespace troupe {

/// JSON path of a config key -> its value as text, for every setting
/// that matters for training (defaults included, so a file that leaves a
/// key out and one that states its default agree). Paths for workers'
/// devices, threads, logging, metrics, checkpoints, timeouts and TLS files
/// are left out: they may differ between nodes of one run.
using identity_map = std::map<std::string, std::string>;

identity_map training_identity(const run_config& cfg);

/// What a checkpoint must share with a run that resumes it: `m` without
/// the cluster's placement (the shard count, which node is the chief, each
/// node's name, address, shards and workers), with the total of the
/// nodes' workers ("/cluster/workers", for a config with nodes) in its
/// place. A checkpoint holds
/// the model's values whole, so a run may resume it on another number of
/// shards, or on other machines, but not with another number of workers,
/// which changes what sync mode aggregates and how the data is divided.
identity_map resume_identity(const identity_map& m);

/// One "path=value" line per key, sorted: what a node sends the chief.
std::string identity_text(const identity_map& m);

/// The inverse of identity_text; lines without '=' are skipped.
identity_map parse_identity(const std::string& text);

/// A list value as the identity writes it ("[256,128]" -> {256, 128},
/// each 1..65536); nothing for text of another form.
std::optional<std::vector<int>> identity_int_list(const std::string& text);

/// SHA-256 of identity_text, as 16 hex digits (64 bits: a name for a
/// config, not a defence against forgery, which TLS is).
std::string identity_digest(const identity_map& m);

/// "" when equal, else the differing keys, e.g. "/training/optimizer/type
/// (chief: adam, node w1: sgd)" for names "chief" and "node w1"; at most
/// `max_keys` named, then "and N more".
std::string identity_difference(const identity_map& a,
                                const std::string& a_name,
                                const identity_map& b,
                                const std::string& b_name, size_t max_keys = 5);

/// A new run's id: 16 random hex digits.
std::string new_run_id();

} // namespace troupe
