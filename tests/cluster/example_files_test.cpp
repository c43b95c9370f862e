// The example cluster files in config/: each parses, and each runs as a
// real multi-process cluster here with its hosts mapped to 127.0.0.1 and
// free ports (the runs are cut short with max_steps).
#include <boost/test/unit_test.hpp>

#include <memory>

#include "cluster_file.hpp"

using namespace troupe::test;
using json = nlohmann::json;

namespace {

/// Runs every node of `file` on 127.0.0.1; returns the chief's output.
std::string run_on_loopback(const std::string& file) {
  temp_dir dir;
  auto j = json::parse(read_all(std::string{TROUPE_SOURCE_DIR} + "/" + file));
  for (auto& n : j["cluster"]["nodes"]) {
    n["host"] = "127.0.0.1";
    n["port"] = free_port();
  }
  j["training"]["max_steps"] = 120;
  j["training"]["checkpoint"]["dir"] = dir.file("ckpt");
  auto cfg = dir.file("cluster.json");
  write_file(cfg, j.dump());
  std::string chief_name = j["cluster"]["chief"];
  std::vector<std::unique_ptr<process>> members;
  for (auto& n : j["cluster"]["nodes"]) {
    std::string name = n["name"];
    if (name != chief_name)
      members.push_back(std::make_unique<process>(
        dir, name, "troupe-node",
        std::vector<std::string>{"--config", cfg, "--node", name}));
  }
  process chief{dir, chief_name, "troupe-node",
                {"--config", cfg, "--node", chief_name}};
  BOOST_TEST(chief.wait(180) == 0, chief.err());
  for (auto& m : members)
    BOOST_TEST(m->wait(20) == 0, m->err());
  return chief.out();
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

BOOST_AUTO_TEST_SUITE_END()
