// The command-line flags that secure a process's links (--key, --tls-ca,
// --tls-cert, --tls-key, --insecure) and the guard they, or the cluster
// file's /cluster/tls, give: mutual TLS where certificates are given,
// else the cluster key (the default), else nothing with --insecure.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "actors/net/link_guard.hpp"
#include "caf/actor_system.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

struct link_options {
  tls_files files;       ///< from the flags; override the cluster file's
  std::string key_file;  ///< --key; empty: default_key_path()
  bool insecure = false; ///< no key, no TLS: plaintext links, any address
};

void add_link_options(CLI::App& app, link_options& opts);

/// Whether a process may make the cluster key when its file is missing:
/// the nodes of a run may (the first one does); a joiner or a shell only
/// reads it (a key made there could prove nothing to the run); a process
/// that opens no link needs none.
enum class key_use { make_if_missing, must_exist, none };

/// The guard of this process's links: mutual TLS with the flags' files
/// where given, else node `node`'s (its own certificate, or /cluster/tls's)
/// when `cluster` has TLS; else the cluster key (--key, or the default
/// file) as `use` says; null with --insecure or key_use::none. The error
/// names a file and what is wrong with it (exit 2).
caf::expected<std::shared_ptr<const link_guard>>
load_link_guard(const link_options& opts, const cluster_config* cluster,
                const std::string& node, key_use use);

/// guard_links for `sys` with what load_link_guard gave.
void apply_link_security(caf::actor_system& sys,
                         std::shared_ptr<const link_guard> guard,
                         const link_options& opts);

} // namespace troupe
