#include "apps/launch/page_steering.hpp"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "apps/shell/chief_request.hpp"
#include "apps/metrics/view_api.hpp"
#include "apps/shell/shell_command.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/hex_text.hpp"

namespace troupe {

namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

/// What the proof's HMAC covers before the body: a proof made for
/// anything else troupe signs with the key can never pass for one here.
constexpr char proof_label[] = "troupe page steer\n";

http_response refuse(int status, const std::string& why) {
  return json_answer(status, {{"error", why}});
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

} // namespace

page_steering::page_steering(caf::actor_system& sys,
                             std::shared_ptr<chief_slot> slot, cluster_key key,
                             caf::timespan patience)
  : sys_(sys), slot_(std::move(slot)), key_(std::move(key)),
    patience_(patience) {}

std::string page_steering::proof(const cluster_key& key,
                                 const std::string& body) {
  std::string signed_text = proof_label + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.secret().data(),
           static_cast<int>(key.secret().size()),
           reinterpret_cast<const unsigned char*>(signed_text.data()),
           signed_text.size(), mac, &len)
      == nullptr)
    std::abort(); // no SHA-256 in this OpenSSL: nothing could be proven
  return to_hex(mac, len);
}

std::optional<http_response> page_steering::answer(const http_request& req) {
  if (req.path == "/api/challenge") {
    if (req.method != "GET" && req.method != "HEAD") {
      auto r = refuse(405, "/api/challenge is read with GET");
      r.headers.emplace_back("Allow", "GET, HEAD");
      return r;
    }
    return challenge();
  }
  if (req.path == "/api/steer")
    return steer(req);
  return std::nullopt;
}

http_response page_steering::challenge() {
  std::array<uint8_t, 32> nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    return refuse(503, "no random bytes for a challenge");
  auto text = to_hex(nonce.data(), nonce.size());
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto now = steady::now();
    while (!challenges_.empty()
           && (challenges_.front().until <= now
               || challenges_.size() >= max_challenges))
      challenges_.pop_front();
    challenges_.push_back({text, now + challenge_life});
  }
  json j;
  j["challenge"] = text;
  j["key_id"] = key_.id();
  j["expires_in_s"] = challenge_life.count();
  return json_answer(200, j);
}

bool page_steering::redeem(const std::string& challenge) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto now = steady::now();
  for (auto it = challenges_.begin(); it != challenges_.end(); ++it)
    if (it->text == challenge) {
      bool in_time = it->until > now;
      challenges_.erase(it);
      return in_time;
    }
  return false;
}

http_response page_steering::steer(const http_request& req) {
  if (req.method != "POST") {
    // A GET must never change the run: a link or an image could send one.
    auto r = refuse(405, "/api/steer takes a POST (steering never goes over "
                         "GET)");
    r.headers.emplace_back("Allow", "POST");
    return r;
  }
  auto* type = req.header("content-type");
  if (type == nullptr || !starts_with(*type, "application/json"))
    return refuse(415, "/api/steer reads application/json");
  // Another site's page: its Origin names that site (a same-origin POST
  // names this port's own, as the Host header does).
  auto* origin = req.header("origin");
  auto* host = req.header("host");
  if (origin != nullptr && (host == nullptr || *origin != "http://" + *host))
    return refuse(403, "a request from another site (Origin " + *origin
                         + ") cannot steer this run");
  auto* site = req.header("sec-fetch-site");
  if (site != nullptr && *site != "same-origin" && *site != "none")
    return refuse(403, "a request from another site (Sec-Fetch-Site " + *site
                         + ") cannot steer this run");
  auto* given = req.header("x-troupe-proof");
  if (given == nullptr)
    return refuse(401, "steering needs the cluster key: give the page the "
                       "key in "
                         + key_.path()
                         + " on the chief's host (the page is read-only "
                           "without it)");
  auto expected = proof(key_, req.body);
  if (given->size() != expected.size()
      || CRYPTO_memcmp(given->data(), expected.data(), expected.size()) != 0)
    return refuse(403, "wrong proof: the page holds another key than the "
                       "chief's (key id "
                         + key_.id() + ", in " + key_.path() + ")");
  json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("command")
      || !body["command"].is_string() || !body.contains("challenge")
      || !body["challenge"].is_string())
    return refuse(400, "/api/steer reads {\"command\": \"pause\", "
                       "\"challenge\": \"...\"}");
  if (!redeem(body["challenge"].get<std::string>()))
    return refuse(403, "the challenge was used already or is over "
                       "60 s old: ask /api/challenge for another");
  auto line = body["command"].get<std::string>();
  auto parsed = parse_shell_command(line);
  if (!parsed)
    return refuse(400, describe(parsed.error()));
  if (!changes_the_run(*parsed))
    return refuse(400, "\"" + line
                         + "\" reads the run: see /api/status, "
                           "/api/nodes, /api/workers and /api/shards");
  auto chief = slot_->get();
  if (!chief)
    return refuse(503, "the run has not started or is over");
  http_response later;
  // Nothing of this object is kept: the answer may come after the port
  // closed (the reply then does nothing); the actor system outlives both.
  later.later = [sys = &sys_, patience = patience_, chief, line,
                 c = *parsed](http_reply reply) {
    request_chief(*sys, chief, "this process", c, true, patience,
                  [reply, line](caf::expected<std::string> text) {
                    if (!text) {
                      bool silent = text.error() == errc::node_unreachable;
                      reply(refuse(silent ? 503 : 409, describe(text.error())));
                      return;
                    }
                    json j;
                    j["command"] = line;
                    j["answer"] = json::parse(*text, nullptr, false);
                    if (j["answer"].is_discarded())
                      j["answer"] = *text;
                    reply(json_answer(200, j));
                  });
  };
  return later;
}

} // namespace troupe
