// Steering a run from the chief's page: a shell command ("pause", "set lr
// 0.01", "kill worker:2", "checkpoint") posted to the metrics port, carried
// out as troupe-shell carries it out (apps/shell/chief_request.hpp) and
// answered with the shell's --json answer. Only a request that proves it
// holds the key is carried out; reading the page and /api needs nothing.
//
//   GET  /api/challenge -> {"challenge": 64 hex digits, "key_id": "...",
//                           "expires_in_s": 60}
//   POST /api/steer        Content-Type: application/json
//                          X-Troupe-Proof: hex of HMAC-SHA256(key,
//                            "troupe page steer\n" + the body's bytes)
//                          {"command": "pause", "challenge": "..."}
//     -> 200 {"command": ..., "answer": the shell's --json answer}
//
// The key never crosses the wire, and each challenge serves once, within
// 60 s, so a recorded request replays to nothing. Against another site's
// page in the same browser (CSRF): it cannot compute the proof; the custom
// header and the JSON content type need a CORS preflight that this port
// never grants; and a request whose Origin is not this port's is refused.
// Refusals: 401 without a proof, 403 a wrong proof, a used or unknown
// challenge or another Origin, 405 a GET, 415 not JSON, 400 a command the
// shell would refuse or one that only reads (the views are under /api/),
// 409 a command the chief refused, 503 a chief that does not answer.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "actors/net/cluster_key.hpp"
#include "apps/launch/chief_metrics.hpp"
#include "apps/web/http_server.hpp"
#include "caf/actor_system.hpp"

namespace troupe {

class page_steering {
public:
  /// Steers the chief in `slot` for a request that proves `key`.
  page_steering(caf::actor_system& sys, std::shared_ptr<chief_slot> slot,
                cluster_key key, caf::timespan patience);

  /// The answer to `req` when its path is /api/challenge or /api/steer
  /// (for /api/steer, one that comes later); nullopt for any other.
  std::optional<http_response> answer(const http_request& req);

  /// The proof of `body` (hex), as the page computes it.
  static std::string proof(const cluster_key& key, const std::string& body);

  /// How long a challenge serves, and how many may wait at once (the
  /// oldest gives way).
  static constexpr std::chrono::seconds challenge_life{60};
  static constexpr size_t max_challenges = 256;

private:
  http_response challenge();
  http_response steer(const http_request& req);
  /// Takes `challenge` out of those waiting: true if it was there in time.
  bool redeem(const std::string& challenge);

  caf::actor_system& sys_;
  std::shared_ptr<chief_slot> slot_;
  cluster_key key_;
  caf::timespan patience_;
  std::mutex mutex_;
  struct issued {
    std::string text;
    std::chrono::steady_clock::time_point until;
  };
  std::deque<issued> challenges_; ///< oldest first
};

} // namespace troupe
