// The runs of the chief's metrics folder (cluster.metrics_dir: every run
// written there, this one and those before it) for the page's history
// charts, and their CSV files to download:
//   GET /api/runs  [{"file": "<run>-<run id>", "label": "run=... mode=...",
//                    "modified_unix_ms": T, "evaluations": URL,
//                    "progress": URL}, ...], oldest first
//   GET /api/runs/<run>-<run id>.csv           the evaluations
//   GET /api/runs/<run>-<run id>.progress.csv  the progress lines
// The CSV files come as text/csv with Content-Disposition: attachment. A
// name is served only when the folder lists it (no path reaches past the
// folder); without a metrics folder /api/runs is [] and the files 404.
#pragma once

#include <optional>
#include <string>

#include "apps/web/http_server.hpp"

namespace troupe {

/// The answer to `req` when its path is /api/runs or under it; nullopt
/// for any other path. `dir`: the metrics folder ("" for none).
std::optional<http_response> metrics_history(const std::string& dir,
                                             const http_request& req);

/// The largest CSV file served (a longer one is refused with where to read
/// it instead).
constexpr size_t max_history_file_bytes = 64 << 20;

} // namespace troupe
