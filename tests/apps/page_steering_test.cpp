// Steering from the chief's page (apps/launch/page_steering): only a POST
// that proves the key with a fresh challenge, from this port's own origin,
// gets as far as the chief; every other request is refused with a status
// and words that say why. The chief's side of an accepted command is
// driven by tests/web/page_test.py on a live cluster.
#include "apps/launch/page_steering.hpp"

// GCC 12 reports a false -Warray-bounds inside nlohmann::json (at -O2).
#pragma GCC diagnostic ignored "-Warray-bounds"

#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "actors/protocol/system_config.hpp"
#include "caf/actor_system_config.hpp"

using namespace troupe;
using json = nlohmann::json;

namespace {

cluster_key key_of(uint8_t fill) {
  cluster_key::bytes b{};
  b.fill(fill);
  return cluster_key{b, "/keys/cluster.key"};
}

struct steering_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<page_steering> steering;

  steering_fixture() {
    init_config(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    // No chief in the slot: a request that passes every check is answered
    // 503 ("the run has not started") instead of reaching one.
    steering = std::make_unique<page_steering>(
      *sys, std::make_shared<chief_slot>(), key_of(7), std::chrono::seconds(1));
  }

  std::string challenge() {
    http_request req;
    req.method = "GET";
    req.path = "/api/challenge";
    auto r = steering->answer(req);
    BOOST_REQUIRE(r);
    BOOST_REQUIRE_EQUAL(r->status, 200);
    return json::parse(r->body)["challenge"].get<std::string>();
  }

  /// A POST as the page sends it; `proof_key` signs it.
  http_request post(const std::string& command, const std::string& challenge,
                    const cluster_key& proof_key) {
    http_request req;
    req.method = "POST";
    req.path = "/api/steer";
    req.body = json{{"command", command}, {"challenge", challenge}}.dump();
    req.headers = {{"host", "127.0.0.1:9100"},
                   {"origin", "http://127.0.0.1:9100"},
                   {"sec-fetch-site", "same-origin"},
                   {"content-type", "application/json"},
                   {"x-troupe-proof",
                    page_steering::proof(proof_key, req.body)}};
    return req;
  }

  /// The status and error of the answer to `req`.
  std::pair<int, std::string> ask(const http_request& req) {
    auto r = steering->answer(req);
    BOOST_REQUIRE(r);
    BOOST_TEST(!r->later); // refusals are answered at once
    BOOST_TEST(r->content_type == "application/json; charset=utf-8");
    auto j = json::parse(r->body);
    return {r->status, j.value("error", "")};
  }
};

void set_header(http_request& req, const std::string& name,
                const std::string& value) {
  for (auto& [k, v] : req.headers)
    if (k == name) {
      v = value;
      return;
    }
  req.headers.emplace_back(name, value);
}

void drop_header(http_request& req, const std::string& name) {
  for (auto it = req.headers.begin(); it != req.headers.end(); ++it)
    if (it->first == name) {
      req.headers.erase(it);
      return;
    }
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(page_steering, steering_fixture)

BOOST_AUTO_TEST_CASE(other_paths_are_not_its_own) {
  http_request req;
  req.method = "GET";
  req.path = "/api/status";
  BOOST_TEST(!steering->answer(req));
}

BOOST_AUTO_TEST_CASE(a_challenge_names_the_key_and_its_life_not_the_key) {
  http_request req;
  req.method = "GET";
  req.path = "/api/challenge";
  auto r = steering->answer(req);
  BOOST_REQUIRE(r);
  auto j = json::parse(r->body);
  BOOST_TEST(j["challenge"].get<std::string>().size() == 64u);
  BOOST_TEST(j["key_id"] == key_of(7).id());
  BOOST_TEST(j["expires_in_s"] == 60);
  BOOST_TEST(r->body.find("0707070707") == std::string::npos);
  BOOST_TEST(challenge() != challenge());
  req.method = "POST";
  BOOST_TEST(steering->answer(req)->status == 405);
}

BOOST_AUTO_TEST_CASE(a_proven_command_reaches_for_the_chief) {
  auto [status, why] = ask(post("pause", challenge(), key_of(7)));
  BOOST_TEST(status == 503);
  BOOST_TEST(why == "the run has not started or is over");
}

BOOST_AUTO_TEST_CASE(steering_never_goes_over_get) {
  auto req = post("pause", challenge(), key_of(7));
  req.method = "GET";
  auto [status, why] = ask(req);
  BOOST_TEST(status == 405);
  BOOST_TEST(why.find("never goes over GET") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(without_the_key_the_page_is_read_only) {
  auto req = post("pause", challenge(), key_of(7));
  drop_header(req, "x-troupe-proof");
  auto [status, why] = ask(req);
  BOOST_TEST(status == 401);
  BOOST_TEST(why.find("steering needs the cluster key") != std::string::npos);
  BOOST_TEST(why.find("/keys/cluster.key") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(another_key_or_a_changed_body_is_refused) {
  auto [status, why] = ask(post("pause", challenge(), key_of(8)));
  BOOST_TEST(status == 403);
  BOOST_TEST(why.find("another key than the chief's (key id " + key_of(7).id())
               != std::string::npos,
             why);
  auto req = post("pause", challenge(), key_of(7));
  req.body.replace(req.body.find("pause"), 5, "_stop");
  BOOST_TEST(ask(req).first == 403);
}

BOOST_AUTO_TEST_CASE(a_challenge_serves_once) {
  auto c = challenge();
  BOOST_TEST(ask(post("pause", c, key_of(7))).first == 503);
  auto [status, why] = ask(post("pause", c, key_of(7)));
  BOOST_TEST(status == 403);
  BOOST_TEST(why.find("used already") != std::string::npos, why);
  BOOST_TEST(ask(post("pause", std::string(64, 'a'), key_of(7))).first == 403);
}

BOOST_AUTO_TEST_CASE(past_the_most_challenges_the_oldest_gives_way) {
  auto first = challenge();
  for (size_t i = 0; i < troupe::page_steering::max_challenges; ++i)
    challenge();
  BOOST_TEST(ask(post("pause", first, key_of(7))).first == 403);
}

BOOST_AUTO_TEST_CASE(another_site_cannot_steer) {
  auto req = post("pause", challenge(), key_of(7));
  set_header(req, "origin", "http://evil.example");
  auto [status, why] = ask(req);
  BOOST_TEST(status == 403);
  BOOST_TEST(why.find("another site (Origin http://evil.example)")
               != std::string::npos,
             why);
  req = post("pause", challenge(), key_of(7));
  set_header(req, "sec-fetch-site", "cross-site");
  BOOST_TEST(ask(req).first == 403);
  // A client that is no browser (curl) sends neither header.
  req = post("pause", challenge(), key_of(7));
  drop_header(req, "origin");
  drop_header(req, "sec-fetch-site");
  BOOST_TEST(ask(req).first == 503);
}

BOOST_AUTO_TEST_CASE(only_json_is_read) {
  auto req = post("pause", challenge(), key_of(7));
  set_header(req, "content-type", "text/plain");
  BOOST_TEST(ask(req).first == 415);
  req = post("pause", challenge(), key_of(7));
  req.body = "pause";
  set_header(req, "x-troupe-proof",
             troupe::page_steering::proof(key_of(7), req.body));
  auto [status, why] = ask(req);
  BOOST_TEST(status == 400);
  BOOST_TEST(why.find("\"command\"") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(commands_are_the_shells_and_only_those_that_steer) {
  auto [status, why] = ask(post("frobnicate", challenge(), key_of(7)));
  BOOST_TEST(status == 400);
  BOOST_TEST(why.find("frobnicate") != std::string::npos, why);
  std::tie(status, why) = ask(post("status", challenge(), key_of(7)));
  BOOST_TEST(status == 400);
  BOOST_TEST(why.find("reads the run: see /api/status") != std::string::npos,
             why);
  std::tie(status, why) = ask(post("set lr -1", challenge(), key_of(7)));
  BOOST_TEST(status == 400, why);
}

BOOST_AUTO_TEST_SUITE_END()
