// The JSON twins of the shell's views on the chief's metrics port, read
// from the view_poller's latest view (no request waits on the chief):
//   GET /api/status   {"run": ..., "actors": [...], "view": {...}}
//   GET /api/nodes    the shell's `nodes --json`
//   GET /api/workers  the shell's `workers --json`
//   GET /api/shards   the shell's `shards --json`
//   GET /api/log?after=SEQ  {"lines": [{"seq", "unix_ms", "text"}, ...],
//                     "last": SEQ, "started_unix_ms": T}: the chief's log
//                     lines kept past SEQ (0 or none: all those kept, the
//                     last 1000); T changes when the chief's process does
// Each view has the shape of the shell's --json (apps/metrics/view_json.hpp);
// /api/status adds "view": when it was taken ("taken_unix_ms") and its age
// ("age_seconds"). Before the chief answers, or when it cannot, 503 with
// {"error": why}. Other /api/ paths 404, other methods 405.
#pragma once

#include <memory>
#include <optional>

#include "apps/launch/log_tail.hpp"
#include "apps/launch/view_poller.hpp"
#include "apps/web/http_server.hpp"

namespace troupe {

/// The answer to `req` when its path is one of the /api/ views above
/// (`tail`: the chief's log, null when none is kept); nullopt for any
/// other path.
std::optional<http_response>
chief_api(view_poller& poller, const log_tail* tail, const http_request& req);

} // namespace troupe
