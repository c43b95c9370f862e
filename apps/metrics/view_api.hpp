// The JSON twins of the shell's views on a metrics port (the chief's, and
// troupe-train's one-process run):
//   GET /api/status   {"run": ..., "actors": [...], "view": {...}}
//   GET /api/nodes    the shell's `nodes --json`
//   GET /api/workers  the shell's `workers --json`
//   GET /api/shards   the shell's `shards --json`
//   GET /api/log?after=SEQ  {"lines": [{"seq", "unix_ms", "text"}, ...],
//                     "last": SEQ, "started_unix_ms": T}: the log lines
//                     kept past SEQ (0 or none: all those kept, the last
//                     1000); T changes when the chief's process does
// Each view has the shape of the shell's --json (apps/metrics/view_json.hpp);
// /api/status adds "view": when it was taken ("taken_unix_ms") and its age
// ("age_seconds"). With no view (the chief has not answered, or cannot),
// 503 with {"error": why}. Other /api/ paths 404, other methods 405.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/protocol/shell_protocol.hpp"
#include "apps/metrics/log_tail.hpp"
#include "apps/web/http_server.hpp"

namespace troupe {

/// A view to answer from: `view` taken at `taken`, or none (null) with
/// `error` saying why.
struct api_view {
  const cluster_view* view = nullptr;
  std::chrono::system_clock::time_point taken;
  std::string error;
};

/// The answer to `req` when its path is one of the /api/ views above
/// (`tail`: the log, null when none is kept; `view` is asked for only
/// when the path needs it); nullopt for any other path.
std::optional<http_response> view_api(const std::function<api_view()>& view,
                                      const log_tail* tail,
                                      const http_request& req);

/// An answer of JSON `j`, escaped and typed so that a browser never reads
/// it as a page.
http_response json_answer(int status, const nlohmann::json& j);

} // namespace troupe
