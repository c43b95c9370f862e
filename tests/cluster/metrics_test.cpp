// troupe-node --metrics-listen: the run's Prometheus endpoint, scraped as a
// Prometheus server would while the run trains, parsed with a strict
// text-format parser (prometheus_scrape.hpp); and its bad flags.
#include <boost/test/unit_test.hpp>

#include <thread>

#include <nlohmann/json.hpp>

#include "prometheus_scrape.hpp"
#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

/// The multi-process tests' model and data as a run in one process with
/// `workers` workers and as many shards, for `epochs` epochs; returns the
/// config's path.
std::string one_process_run(const temp_dir& dir, int workers, int epochs = 2) {
  cluster_spec spec;
  spec.epochs = epochs;
  spec.nodes = {{"chief", 1, 1}};
  return write_embedded(dir, write_cluster(dir, spec), workers, workers);
}

/// The port of the chief's "metrics: http://127.0.0.1:PORT/metrics" line.
uint16_t metrics_port(const process& p) {
  auto out = p.out();
  auto at = out.find("metrics: http://127.0.0.1:");
  if (at == std::string::npos)
    return 0;
  return static_cast<uint16_t>(std::atoi(out.c_str() + at + 26));
}

/// The metrics port of `run` once it serves and has trained 100 steps.
uint16_t serving_port(running_cluster& run) {
  BOOST_REQUIRE_MESSAGE(run.chief().wait_for_output("metrics: http://", 60),
                        run.logs());
  auto port = metrics_port(run.chief());
  BOOST_REQUIRE(port > 0);
  run.require_step(100);
  return port;
}

/// `e` with every sample's run labels (run="...",run_id="...", which every
/// series carries first) taken out of its key, so that checks name the
/// labels of their own; a sample without them fails the test.
exposition without_run_labels(const exposition& e) {
  exposition out;
  out.types = e.types;
  for (auto& [key, value] : e.samples) {
    auto brace = key.find('{');
    auto id = key.find("\",run_id=\"", brace);
    auto id_end = id == std::string::npos ? id : key.find('"', id + 10);
    BOOST_REQUIRE_MESSAGE(brace != std::string::npos
                            && key.compare(brace, 6, "{run=\"") == 0
                            && id_end != std::string::npos,
                          "no run labels: " << key);
    auto rest = key.substr(id_end + 1); // "}" or ",more}"
    out.samples[key.substr(0, brace)
                + (rest == "}" ? std::string{} : "{" + rest.substr(1))] = value;
  }
  return out;
}

/// Scrapes until the parse succeeds with `key` present (the first scrape
/// may come before any worker reported); fails the test after `tries`.
exposition scrape(uint16_t port, const std::string& key, int tries = 50) {
  exposition e;
  std::string last;
  for (int i = 0; i < tries; ++i) {
    auto [status, body] = http_get(port, "/metrics");
    last = std::to_string(status) + " " + body;
    if (status == 200) {
      e = parse_exposition(body);
      BOOST_REQUIRE_MESSAGE(e.error.empty(), e.error + "\n" + body);
      e = without_run_labels(e);
      if (e.samples.count(key) > 0)
        return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_FAIL("no scrape with " + key + ": " + last);
  return e;
}

} // namespace

BOOST_AUTO_TEST_SUITE(metrics)

BOOST_AUTO_TEST_CASE(a_scrape_during_the_run_shows_it_moving) {
  temp_dir dir;
  auto cfg = one_process_run(dir, 2, 6);
  running_cluster run{
    dir, {"node", {"--config", cfg, "--metrics-listen", "127.0.0.1:0"}}};
  auto port = serving_port(run);
  const std::string worker0 =
    R"(troupe_worker_steps_total{worker="0",node="local"})";
  auto first = scrape(port, worker0);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto second = scrape(port, worker0);
  // Every family is typed; counters and gauges as documented.
  BOOST_TEST(first.types["troupe_steps_total"] == "counter");
  BOOST_TEST(first.types["troupe_samples_per_second"] == "gauge");
  BOOST_TEST(first.types["troupe_samples_total"] == "counter");
  BOOST_TEST(first.types["process_resident_memory_bytes"] == "gauge");
  // The run moves between two scrapes.
  BOOST_TEST(second.at("troupe_steps_total") > first.at("troupe_steps_total"));
  BOOST_TEST(second.at("troupe_samples_total")
             > first.at("troupe_samples_total"));
  BOOST_TEST(second.at(worker0) > first.at(worker0));
  // Reading samples: the set is in memory (gzipped IDX, inflated), so its
  // steps spend time gathering them but read no file.
  const std::string read0 =
    R"(troupe_worker_read_seconds_total{worker="0",node="local"})";
  BOOST_TEST(first.types["troupe_worker_read_seconds_total"] == "counter");
  BOOST_TEST(second.at(read0) > 0);
  BOOST_TEST(
    second.at(R"(troupe_worker_read_bytes_total{worker="0",node="local"})")
    == 0);
  BOOST_TEST(
    second.at(R"(troupe_shard_updates_total{shard="0",node="local"})")
    > first.at(R"(troupe_shard_updates_total{shard="0",node="local"})"));
  BOOST_TEST(second.at("process_cpu_seconds_total")
             > first.at("process_cpu_seconds_total"));
  // Bytes through the shards: every push carries its shard's whole range,
  // so the two shards' bytes per push add up to the model's size.
  double bytes_per_push = 0;
  for (auto shard : {"0", "1"}) {
    auto labels = std::string{"{shard=\""} + shard + "\",node=\"local\"}";
    auto pushed = "troupe_shard_pushed_bytes_total" + labels;
    auto pulled = "troupe_shard_pulled_bytes_total" + labels;
    BOOST_TEST(second.at(pushed) > first.at(pushed));
    BOOST_TEST(second.at(pulled) > first.at(pulled));
    double pushes = 0;
    for (auto outcome : {"accepted", "stale", "refused"})
      pushes += second.at("troupe_shard_pushes_total{shard=\""
                          + std::string{shard} + "\",node=\"local\",outcome=\""
                          + outcome + "\"}");
    BOOST_REQUIRE(pushes > 0);
    bytes_per_push += second.at(pushed) / pushes;
  }
  BOOST_TEST(bytes_per_push == mlp_param_bytes);
  // Values as the run has them.
  BOOST_TEST(second.at("troupe_planned_steps") == 6 * 469);
  BOOST_TEST(second.at("troupe_learning_rate") == 0.001);
  BOOST_TEST(second.at("troupe_samples_per_second") > 0);
  BOOST_TEST(second.at("troupe_loss") > 0);
  BOOST_TEST(second.at("troupe_loss") < 5);
  BOOST_TEST(second.at("process_resident_memory_bytes") > 50e6);
  BOOST_TEST(second.at(R"(troupe_node_resident_memory_bytes{node="local"})")
             > 50e6);
  BOOST_TEST(second.at(R"(troupe_node_cpu_seconds_total{node="local"})") > 0);
  BOOST_TEST(second.at(R"(troupe_worker_steps_total{worker="1",node="local"})")
             > 0);
  // The run's labels name this run, on every series (without_run_labels
  // checked that each has them).
  auto raw = http_get(port, "/metrics").second;
  BOOST_TEST(has(raw, "\ntroupe_samples_total{run=\"multi-process-test\","
                      "run_id=\""),
             raw);
  bool info = false;
  for (auto& [key, value] : second.samples)
    if (key.rfind("troupe_run_info{mode=\"async\"", 0) == 0 && value == 1)
      info = true;
  BOOST_TEST(info);
  // The page is at /; other paths are not found.
  BOOST_TEST(http_get(port, "/").first == 200);
  BOOST_TEST(http_get(port, "/nope").first == 404);
  run.require_finished(240);
  // The endpoint closes with the run.
  BOOST_TEST(http_get(port, "/metrics").first == 0);
}

BOOST_AUTO_TEST_CASE(the_api_views_are_the_shells_json_kept_fresh) {
  using json = nlohmann::json;
  temp_dir dir;
  auto cfg = one_process_run(dir, 2, 6);
  running_cluster run{
    dir, {"node", {"--config", cfg, "--metrics-listen", "127.0.0.1:0"}}};
  auto port = serving_port(run);
  // The status twice, 1.5 s apart: the view moves and is never older than
  // the poller's half second and one answer of the chief's.
  auto status = [&] {
    auto [code, body] = http_get(port, "/api/status");
    BOOST_REQUIRE_MESSAGE(code == 200, code << " " << body);
    return json::parse(body);
  };
  auto first = status();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto second = status();
  BOOST_TEST(first["run"]["name"] == "multi-process-test");
  BOOST_TEST(second["run"]["steps"].get<int64_t>()
             > first["run"]["steps"].get<int64_t>());
  BOOST_TEST(second["view"]["age_seconds"].get<double>() < 2.0);
  // chief, feeder, 2 shards, 2 workers, as the shell lists them.
  BOOST_TEST(second["actors"].size() == 6u, second.dump());
  BOOST_TEST(second["actors"][5]["id"] == "worker:1");
  for (auto [view, size] :
       {std::pair{"nodes", 1u}, {"workers", 2u}, {"shards", 2u}}) {
    auto [code, body] = http_get(port, std::string{"/api/"} + view);
    BOOST_TEST(code == 200, view);
    BOOST_TEST(json::parse(body).size() == size, view << ": " << body);
  }
  // Typed as JSON, never cached, never sniffed.
  auto raw = http_exchange(port, "GET /api/workers HTTP/1.1\r\n"
                                 "Connection: close\r\n\r\n");
  BOOST_TEST(has(raw, "\r\nContent-Type: application/json; charset=utf-8\r\n"),
             raw);
  BOOST_TEST(has(raw, "\r\nCache-Control: no-store\r\n"), raw);
  BOOST_TEST(has(raw, "\r\nX-Content-Type-Options: nosniff\r\n"), raw);
  // An unknown view, and a view written to.
  auto [missing, why] = http_get(port, "/api/nope");
  BOOST_TEST(missing == 404);
  BOOST_TEST(has(why, "no view /api/nope"), why);
  auto post = http_exchange(port, "POST /api/status HTTP/1.1\r\n"
                                  "Content-Length: 0\r\nConnection: close"
                                  "\r\n\r\n");
  BOOST_TEST(post.rfind("HTTP/1.1 405 ", 0) == 0, post);
  run.require_finished(240);
}

BOOST_AUTO_TEST_CASE(troupe_train_serves_and_writes_its_metrics_too) {
  temp_dir dir;
  auto cfg = one_process_run(dir, 1, 6);
  running_cluster run{dir,
                      {"train",
                       {"--config", cfg, "--metrics-listen", "127.0.0.1:0",
                        "--metrics-dir", dir.file("runs")},
                       {},
                       "troupe-train"}};
  BOOST_REQUIRE_MESSAGE(run.chief().wait_for_output("metrics: http://", 60),
                        run.logs());
  auto port = metrics_port(run.chief());
  BOOST_REQUIRE(port > 0);
  const std::string worker0 =
    R"(troupe_worker_steps_total{worker="0",node="local"})";
  auto first = scrape(port, "troupe_loss");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto second = scrape(port, "troupe_loss");
  BOOST_TEST(second.at("troupe_steps_total") > first.at("troupe_steps_total"));
  BOOST_TEST(second.at("troupe_samples_total")
             > first.at("troupe_samples_total"));
  BOOST_TEST(second.at(worker0) == second.at("troupe_steps_total"));
  BOOST_TEST(second.at("troupe_planned_steps") == 6 * 469);
  BOOST_TEST(second.at("troupe_learning_rate") == 0.001);
  run.require_finished(240);
  // Its metrics files, named by the run and its id.
  auto out = run.chief().out();
  auto at = out.find("metrics: " + dir.file("runs/multi-process-test-"));
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, out);
  auto base = out.substr(at + 9, out.find(".{jsonl", at) - at - 9);
  auto csv = read_all(base + ".csv");
  BOOST_TEST(csv.find(" mode=local workers=1 ") != std::string::npos, csv);
  BOOST_TEST(count_of(csv, "\n") == 2u + 6u, csv); // 2 header lines, 6 epochs
  BOOST_TEST(count_of(read_all(base + ".progress.csv"), "\n") > 20u);
}

// Each node here must fail to start: started by hand, alone.
BOOST_AUTO_TEST_CASE(bad_listen_addresses_are_refused_before_the_run) {
  temp_dir dir;
  auto cfg = one_process_run(dir, 1);
  {
    process node{dir,
                 "node",
                 "troupe-node",
                 {"--config", cfg, "--metrics-listen", "localhost"}};
    BOOST_TEST(node.wait(60) == 2);
    BOOST_TEST(has(node.err(), "--metrics-listen"), node.err());
  }
  // A port another process holds.
  held_port held;
  BOOST_REQUIRE(held.port() > 0);
  auto taken = std::to_string(held.port());
  process node{dir,
               "node2",
               "troupe-node",
               {"--config", cfg, "--metrics-listen", "127.0.0.1:" + taken}};
  BOOST_TEST(node.wait(60) == 2);
  BOOST_TEST(has(node.err(), "cannot listen at 127.0.0.1:" + taken),
             node.err());
  BOOST_TEST(!has(node.out(), "step "), node.out()); // trained nothing
}

BOOST_AUTO_TEST_SUITE_END()
