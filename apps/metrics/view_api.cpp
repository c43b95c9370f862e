#include "apps/metrics/view_api.hpp"

#include <string>

#include "apps/metrics/view_json.hpp"

namespace troupe {

using json = nlohmann::json;

http_response json_answer(int status, const json& j) {
  // Names in the JSON come from configs and joining nodes: dump() escapes
  // them as JSON strings, and the content type keeps a browser from
  // reading the answer as a page.
  return {status,
          "application/json; charset=utf-8",
          j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
          {},
          {}};
}

namespace {

/// The log lines past ?after=SEQ.
http_response log_answer(const log_tail& tail, const http_request& req) {
  int64_t after = 0;
  const std::string key = "after=";
  auto at = req.query.find(key);
  if (at != std::string::npos && (at == 0 || req.query[at - 1] == '&')) {
    try {
      after = std::stoll(req.query.substr(at + key.size()));
    } catch (const std::exception&) {
      return json_answer(400, {{"error", "/api/log?after=SEQ takes a line's "
                                         "number, not "
                                           + req.query}});
    }
  }
  json lines = json::array();
  int64_t last = after;
  for (auto& l : tail.since(after)) {
    json one;
    one["seq"] = l.seq;
    one["unix_ms"] = l.unix_ms;
    one["text"] = l.text;
    lines.push_back(std::move(one));
    last = l.seq;
  }
  json j;
  j["lines"] = std::move(lines);
  j["last"] = last;
  j["started_unix_ms"] = tail.started_unix_ms();
  return json_answer(200, j);
}

} // namespace

std::optional<http_response> view_api(const std::function<api_view()>& view,
                                      const log_tail* tail,
                                      const http_request& req) {
  const std::string prefix = "/api/";
  if (req.path.rfind(prefix, 0) != 0)
    return std::nullopt;
  auto name = req.path.substr(prefix.size());
  if (name != "status" && name != "nodes" && name != "workers"
      && name != "shards" && (name != "log" || tail == nullptr))
    return json_answer(404, {{"error", "no view " + req.path
                                         + " (status, nodes, workers, "
                                           "shards, log; runs and "
                                           "challenge where served)"}});
  if (req.method != "GET" && req.method != "HEAD") {
    auto r = json_answer(405, {{"error", req.path + " is read with GET"}});
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (name == "log")
    return log_answer(*tail, req);
  auto s = view();
  if (s.view == nullptr)
    return json_answer(503, {{"error", s.error}});
  auto& v = *s.view;
  json j;
  if (name == "status") {
    j = status_json(v);
    auto taken = std::chrono::duration_cast<std::chrono::milliseconds>(
      s.taken.time_since_epoch());
    j["view"] = {{"taken_unix_ms", taken.count()},
                 {"age_seconds", std::chrono::duration<double>(
                                   std::chrono::system_clock::now() - s.taken)
                                   .count()}};
  } else if (name == "nodes") {
    j = nodes_json(v);
  } else if (name == "workers") {
    j = json::array();
    for (auto& w : v.workers)
      j.push_back(worker_json(w));
  } else {
    j = json::array();
    for (auto& sh : v.shards)
      j.push_back(shard_json(sh));
  }
  return json_answer(200, j);
}

} // namespace troupe
