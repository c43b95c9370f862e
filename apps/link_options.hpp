// The command-line flags that secure a process's links (--tls-ca,
// --tls-cert, --tls-key, --insecure) and the TLS context they, or the
// cluster file's /cluster/tls, give.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "actors/tls.hpp"
#include "caf/actor_system.hpp"
#include "runtime/config.hpp"

namespace troupe {

struct link_options {
  tls_files files;       ///< from the flags; override the cluster file's
  bool insecure = false; ///< plaintext links beyond loopback
};

void add_link_options(CLI::App& app, link_options& opts);

/// The TLS context of this process: the flags' files where given, else
/// node `node`'s (its own certificate, or /cluster/tls's) when `cluster`
/// has TLS; null when neither asks for TLS. The error names a file and
/// what is wrong with it (exit 2).
caf::expected<std::shared_ptr<const tls_context>>
load_link_tls(const link_options& opts, const cluster_config* cluster,
              const std::string& node);

/// secure_links for `sys` with what load_link_tls gave.
void apply_link_security(caf::actor_system& sys,
                         std::shared_ptr<const tls_context> tls,
                         const link_options& opts);

} // namespace troupe
