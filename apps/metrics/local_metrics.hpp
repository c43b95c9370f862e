// What troupe-train's --metrics-listen serves: the one-process run as the
// chief's exposition and /api views show a cluster (apps/metrics/
// prometheus_text, apps/metrics/view_api), with mode "local", one worker,
// 0, and one node, "local": this process.
#pragma once

#include <optional>
#include <string>

#include "actors/protocol/shell_protocol.hpp"
#include "apps/metrics/log_tail.hpp"
#include "apps/web/http_server.hpp"
#include "models/trainer.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// The view of `status` (read under its mutex) for run `cfg`.
cluster_view local_view(local_status& status, const run_config& cfg);

/// The exposition of local_view.
std::string local_metrics(local_status& status, const run_config& cfg);

/// What troupe-train's port serves besides /metrics: the /api views of
/// local_view, /api/log from `tail` (null: none kept), /api/runs from the
/// metrics folder, and the page; nullopt for any other path.
std::optional<http_response> local_port_answer(local_status& status,
                                               const run_config& cfg,
                                               const log_tail* tail,
                                               const http_request& req);

} // namespace troupe
