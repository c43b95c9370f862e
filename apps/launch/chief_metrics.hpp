// What troupe-node's --metrics-listen serves: the chief's cluster view (the
// shell's `status`, asked for at every scrape) as Prometheus text, plus
// this process's memory and CPU, at /metrics; and the same view's JSON
// at /api/ (apps/launch/chief_api.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>

#include "actors/protocol/chief_protocol.hpp"
#include "apps/metrics/metrics_endpoint.hpp"
#include "caf/actor_system.hpp"

namespace troupe {

/// The chief a scrape asks; empty before the run starts and after it ends
/// (a scrape then gets 503 with the reason).
class chief_slot {
public:
  void set(chief_actor chief) {
    std::lock_guard<std::mutex> guard{mutex_};
    chief_ = std::move(chief);
  }
  chief_actor get() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return chief_;
  }

private:
  mutable std::mutex mutex_;
  chief_actor chief_;
};

/// A render function for metrics_endpoint that asks the chief in `slot`
/// (within `timeout`) on every scrape.
metrics_endpoint::render_fn chief_metrics(caf::actor_system& sys,
                                          std::shared_ptr<chief_slot> slot,
                                          caf::timespan timeout);

/// Serves chief_metrics at `at`, bound now (before the run starts, so a
/// taken port fails at once), and says where on `log` (null: nowhere).
caf::expected<std::unique_ptr<metrics_endpoint>> serve_chief_metrics(
  caf::actor_system& sys, const std::pair<std::string, uint16_t>& at,
  std::shared_ptr<chief_slot> slot, caf::timespan timeout, std::ostream* log);

} // namespace troupe
