// What troupe-node's --metrics-listen serves: the chief's cluster view (the
// shell's `status`, asked for at every scrape) as Prometheus text, plus
// this process's memory and CPU, at /metrics; and the same view's JSON
// at /api/ (apps/metrics/view_api.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>

#include "actors/net/cluster_key.hpp"
#include "actors/protocol/chief_protocol.hpp"
#include "apps/metrics/log_tail.hpp"
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

/// The key a request to steer from the page must prove
/// (apps/launch/page_steering.hpp): the cluster key when `sys`'s links use
/// one, else the key file of the user who runs the chief (`key_file`, or
/// the default one), made if missing and said so on `log`. Under mutual
/// TLS or --insecure the page so steers with a secret only that user has.
caf::expected<cluster_key> page_steering_key(caf::actor_system& sys,
                                             const std::string& key_file,
                                             std::ostream* log);

/// What the chief's metrics port serves besides the metrics, the /api
/// views and the page.
struct chief_port_parts {
  cluster_key steering_key;             ///< what a steering request proves
  std::shared_ptr<const log_tail> tail; ///< /api/log (null: none kept)
  std::string metrics_dir;              ///< /api/runs ("": none)
};

class view_poller;

/// The chief's metrics port: its endpoint, and the views its page reads.
class chief_port {
public:
  chief_port(std::unique_ptr<metrics_endpoint> endpoint,
             std::shared_ptr<view_poller> views);
  ~chief_port();

  /// The run is over with `result`: the page's view says "done" or
  /// "failed" (and why), and a page that watches gets up to 5 s to read
  /// it before the port closes; none when nobody watches.
  void close(const caf::expected<cluster_summary>& result);

  chief_port(const chief_port&) = delete;
  chief_port& operator=(const chief_port&) = delete;

private:
  std::unique_ptr<metrics_endpoint> endpoint_;
  std::shared_ptr<view_poller> views_;
};

/// Serves chief_metrics at `at`, bound now (before the run starts, so a
/// taken port fails at once), with the /api views, the page, and `parts`;
/// says where on `log` (null: nowhere).
caf::expected<std::unique_ptr<chief_port>>
serve_chief_metrics(caf::actor_system& sys,
                    const std::pair<std::string, uint16_t>& at,
                    std::shared_ptr<chief_slot> slot, caf::timespan timeout,
                    chief_port_parts parts, std::ostream* log);

} // namespace troupe
