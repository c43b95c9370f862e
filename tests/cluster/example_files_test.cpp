// The example cluster files in config/: each parses, and each runs as a
// real multi-process cluster here with its hosts mapped to 127.0.0.1 and
// free ports (the runs are cut short with max_steps).
#include <boost/test/unit_test.hpp>

#include "running_cluster.hpp"

using namespace troupe::test;
using json = nlohmann::json;

namespace {

/// `file` with its hosts mapped to 127.0.0.1 at free ports, cut short,
/// written to <dir>/cluster.json with its checkpoints beside it (as the
/// file's own relative folder is); returns the path.
std::string on_loopback(const temp_dir& dir, const std::string& file) {
  auto j = json::parse(read_all(std::string{TROUPE_SOURCE_DIR} + "/" + file));
  for (auto& n : j["cluster"]["nodes"]) {
    n["host"] = "127.0.0.1";
    n["port"] = free_port();
  }
  j["training"]["max_steps"] = 120;
  j["training"]["checkpoint"]["dir"] = "ckpt";
  auto cfg = dir.file("cluster.json");
  write_file(cfg, j.dump());
  return cfg;
}

/// Runs every node of the cluster file `cfg` (the chief with
/// `chief_flags`); returns the chief's output.
std::string run_nodes(const temp_dir& dir, const std::string& cfg,
                      const std::vector<std::string>& chief_flags = {}) {
  cluster_start how;
  how.chief_flags = chief_flags;
  auto cluster = running_cluster::from_file(dir, cfg, how);
  cluster.require_finished(180);
  return cluster.chief().out();
}

std::string run_on_loopback(const std::string& file) {
  temp_dir dir;
  return run_nodes(dir, on_loopback(dir, file));
}

} // namespace

BOOST_AUTO_TEST_SUITE(example_files)

BOOST_AUTO_TEST_CASE(one_host_file_runs) {
  auto out = run_on_loopback("config/cluster-local.json");
  BOOST_TEST(out.find("all 5 nodes are up") != std::string::npos, out);
  BOOST_TEST(summary_field(out, 4) == "120", out);
}

BOOST_AUTO_TEST_CASE(several_hosts_file_runs) {
  auto out = run_on_loopback("config/cluster-hosts.json");
  BOOST_TEST(out.find("all 5 nodes are up") != std::string::npos, out);
  BOOST_TEST(out.find("sync, 4 workers, 4 shards") != std::string::npos, out);
  BOOST_TEST(summary_field(out, 4) == "120", out);
}

// The README's multi-process quick start, twice in a row and then with
// --fresh: the second run resumes the first (finished) one and says so;
// --fresh starts over with the first run's files set aside, not lost.
BOOST_AUTO_TEST_CASE(the_quick_start_runs_twice_and_fresh_starts_over) {
  temp_dir dir;
  auto cfg = on_loopback(dir, "config/cluster-local.json");
  auto first = run_nodes(dir, cfg);
  BOOST_TEST(summary_field(first, 4) == "120", first);
  BOOST_TEST(has(first, "step 120: checkpoint " + dir.file("ckpt/ckpt-120")),
             first);
  auto second = run_nodes(dir, cfg);
  BOOST_TEST(has(second, "resuming from " + dir.file("ckpt/ckpt-120")
                           + ".safetensors at step 120"),
             second);
  BOOST_TEST(has(second, "the run had reached its last step (120): nothing "
                         "is left to train"),
             second);
  BOOST_TEST(summary_field(second, 4) == "120", second);
  auto third = run_nodes(dir, cfg, {"--fresh"});
  BOOST_TEST(has(third, "starting over: the checkpoints of earlier runs in "
                          + dir.file("ckpt") + " are set aside in "
                          + dir.file("ckpt/set-aside-")),
             third);
  BOOST_TEST(!has(third, "resuming"), third);
  BOOST_TEST(summary_field(third, 4) == "120", third);
}

BOOST_AUTO_TEST_SUITE_END()
