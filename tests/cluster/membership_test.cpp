// Clusters whose processes learn their nodes from the scheduler's
// environment, as on Kubernetes and Slurm: each troupe-node gets the same
// config (no nodes in it, no --node) and only TF_CONFIG, or only Slurm's
// step variables. The data planes listen at fixed ports.
#include <boost/test/unit_test.hpp>

#include <thread>

#include "running_cluster.hpp"

using namespace troupe::test;
using json = nlohmann::json;

namespace {

/// `count` free ports in a row on 127.0.0.1 (free_port hands them out in
/// order, skipping taken ones); 0 when none were found.
uint16_t free_ports_in_a_row(int count) {
  for (int tries = 0; tries < 50; ++tries) {
    uint16_t first = free_port(), last = first;
    bool in_a_row = first != 0;
    for (int i = 1; i < count && in_a_row; ++i) {
      auto p = free_port();
      in_a_row = p == last + 1;
      last = p;
    }
    if (in_a_row)
      return first;
  }
  return 0;
}

/// The multi-process tests' model and data with no nodes: the config
/// every process of an environment-made cluster reads.
std::string write_plain_config(const temp_dir& dir, const json& cluster) {
  cluster_spec spec;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"worker0", 0, 1}};
  auto j = json::parse(read_all(write_cluster(dir, spec)));
  j["cluster"] = cluster;
  j["training"]["epochs"] = 1;
  j["training"]["log_every_steps"] = 20;
  auto path = dir.file("plain.json");
  write_file(path, j.dump());
  return path;
}

/// troupe-node --config `cfg` with `env` ("NAME=value" words) added to
/// its environment, as a scheduler starts it: no --node, so running_cluster
/// is given each process rather than a cluster_spec.
node_launch with_env(const std::string& name, const std::string& cfg,
                     const std::vector<std::string>& env) {
  std::vector<std::string> prefix{"/usr/bin/env"};
  prefix.insert(prefix.end(), env.begin(), env.end());
  return {name, {"--config", cfg}, prefix};
}

/// The steps that the progress lines starting with `prefix` name
/// ("\nstep ", "\nworker 0: step "); evaluation lines left out.
std::vector<long> logged_steps(const std::string& out,
                               const std::string& prefix) {
  std::vector<long> steps;
  for (auto at = out.find(prefix); at != std::string::npos;
       at = out.find(prefix, at + 1)) {
    auto line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    if (has(line, "examples/sec"))
      steps.push_back(std::atol(out.c_str() + at + prefix.size()));
  }
  return steps;
}

} // namespace

BOOST_AUTO_TEST_SUITE(membership)

// As a TFJob starts its pods: each gets TF_CONFIG and nothing else; one
// worker starts late, while the chief waits for it.
BOOST_AUTO_TEST_CASE(tf_config_alone_starts_a_cluster_and_a_late_worker_joins) {
  temp_dir dir;
  auto base = free_ports_in_a_row(10);
  BOOST_REQUIRE(base != 0);
  // Control ports base, base + 2, ...; each data plane one above.
  auto at = [&](int i) { return "127.0.0.1:" + std::to_string(base + 2 * i); };
  json tf_cluster = {
    {"chief", {at(0)}}, {"ps", {at(1), at(2)}}, {"worker", {at(3), at(4)}}};
  auto cfg = write_plain_config(dir, {{"shards", 2},
                                      {"workers", 2},
                                      {"data_port_offset", 1},
                                      {"node_timeout_s", 60}});
  auto tf_config = [&](const std::string& type, int index) {
    return "TF_CONFIG="
           + json{{"cluster", tf_cluster},
                  {"task", {{"type", type}, {"index", index}}}}
               .dump();
  };
  running_cluster cluster{dir,
                          {with_env("ps0", cfg, {tf_config("ps", 0)}),
                           with_env("ps1", cfg, {tf_config("ps", 1)}),
                           with_env("worker0", cfg, {tf_config("worker", 0)})},
                          with_env("chief", cfg, {tf_config("chief", 0)})};
  auto& chief = cluster.chief();
  BOOST_REQUIRE_MESSAGE(chief.wait_for_output("node worker0 (", 60),
                        cluster.logs());
  // The chief waits for the worker that is not there yet.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  BOOST_TEST(!has(chief.out(), "all 5 nodes are up"), cluster.logs());
  BOOST_TEST(chief.running());
  cluster.start(with_env("worker1", cfg, {tf_config("worker", 1)}));
  cluster.require_finished(180, 30);
  auto out = chief.out();
  BOOST_TEST(has(out, "membership: TF_CONFIG: this is node chief; the chief "
                      "on chief ("
                        + at(0)
                        + "); shards on ps0, ps1 (2); workers on worker0, "
                          "worker1 (2)"),
             out);
  BOOST_TEST(has(out, "all 5 nodes are up"), out);
  BOOST_TEST(epoch_samples(out) == std::vector<long>{60000},
             boost::test_tools::per_element());
  BOOST_TEST(has(cluster.node("worker1").out(),
                 "membership: TF_CONFIG: this is node "
                 "worker1"));
  // log_every_steps 20: progress lines at 20, 40, 60, ... though workers
  // report several steps at once; each worker's lines likewise.
  auto steps = logged_steps(out, "\nstep ");
  BOOST_TEST(steps.size() >= 20u, out);
  for (size_t i = 0; i < steps.size(); ++i)
    BOOST_TEST(steps[i] == 20 * static_cast<long>(i + 1), out);
  for (auto* worker : {"\nworker 0: step ", "\nworker 1: step "})
    for (auto step : logged_steps(out, worker))
      BOOST_TEST(step % 20 == 0, out);
  // Every data plane at its control port plus the offset.
  BOOST_TEST(has(out,
                 "node chief: listening on " + at(0)
                   + ", data plane on 127.0.0.1:" + std::to_string(base + 1)),
             out);
  auto& members = cluster.members(); // ps0, ps1, worker0, worker1
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(data_port_of(*members[i]) == base + 2 * (i + 1) + 1,
               members[i]->out());
}

// As srun -n 5 starts its tasks: Slurm's step variables alone place them;
// a worker task killed with kill -9 is one node lost, and the run goes on
// with its workers moved (on_node_loss "move"), every sample once per
// epoch; a worker started in its place (a second srun) joins with
// --join.
BOOST_AUTO_TEST_CASE(
  slurm_variables_place_five_tasks_and_a_killed_one_is_lost) {
  temp_dir dir;
  auto base = free_ports_in_a_row(10);
  BOOST_REQUIRE(base != 0);
  auto cfg = write_plain_config(dir, {{"shards", 2},
                                      {"workers", 2},
                                      {"base_port", base},
                                      {"node_timeout_s", 60},
                                      {"heartbeat_interval_ms", 200},
                                      {"connection_timeout_ms", 1500}});
  // Four epochs (about 6 s here), so that the kill and the join land
  // inside the run.
  auto j = json::parse(read_all(cfg));
  j["training"]["epochs"] = 4;
  write_file(cfg, j.dump());
  auto task = [&](int i) {
    return std::vector<std::string>{
      "SLURM_PROCID=" + std::to_string(i), "SLURM_STEP_NUM_TASKS=5",
      "SLURM_STEP_NODELIST=localhost",     "SLURM_STEP_TASKS_PER_NODE=5",
      "SLURM_DISTRIBUTION=block",          "SLURM_JOB_ID=7"};
  };
  std::vector<node_launch> tasks;
  const char* names[] = {"ps0", "ps1", "worker0", "worker1"};
  for (int i = 1; i < 5; ++i)
    tasks.push_back(with_env(names[i - 1], cfg, task(i)));
  running_cluster cluster{dir, tasks, with_env("chief", cfg, task(0))};
  auto& chief = cluster.chief();
  auto& members = cluster.members(); // ps0, ps1, worker0, worker1, late
  BOOST_REQUIRE_MESSAGE(chief.wait_for_output("\nstep ", 120), cluster.logs());
  BOOST_REQUIRE(members[3]->running());
  members[3]->kill9(); // worker1's task
  BOOST_REQUIRE_MESSAGE(chief.wait_for_output(") is down", 60), cluster.logs());
  // The config the chief hands a joiner places the nodes as Slurm did, so
  // the joiner's training identity is the chief's.
  cluster.start({"late",
                 {"--join", "127.0.0.1:" + std::to_string(base), "--workers",
                  "1", "--name", "late"}});
  BOOST_REQUIRE_MESSAGE(
    chief.wait_for_output("adding 1 worker on node late", 60), cluster.logs());
  cluster.require_chief_finished(180);
  BOOST_TEST(members[4]->wait(30) == 0, cluster.logs());
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(members[i]->wait(30) == 0, cluster.logs());
  auto out = chief.out();
  BOOST_TEST(has(out, "membership: Slurm: this is node chief; the chief on "
                      "chief (localhost:"
                        + std::to_string(base)
                        + "); shards on ps0, ps1 (2); workers on worker0, "
                          "worker1 (2)"),
             out);
  BOOST_TEST(has(out, "node worker1 (localhost:" + std::to_string(base + 8)
                        + ") is down"),
             out);
  BOOST_TEST(epoch_samples(out)
               == (std::vector<long>{60000, 60000, 60000, 60000}),
             boost::test_tools::per_element());
  BOOST_TEST(summary_field(out, 4) == "1876", out);
  // Task i at base + 2i, its data plane one above.
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(has(members[i]->out(), "listening on localhost:"
                                        + std::to_string(base + 2 * (i + 1))),
               members[i]->out());
    BOOST_TEST(data_port_of(*members[i]) == base + 2 * (i + 1) + 1,
               members[i]->out());
  }
}

// What the environment gets wrong is said at start, exit 2. (Each process
// must fail to start: started alone, no cluster.)
BOOST_AUTO_TEST_CASE(a_bad_environment_is_named) {
  temp_dir dir;
  auto cfg = write_plain_config(dir, {{"shards", 2}, {"workers", 2}});
  auto evaluator = start_process(
    dir,
    with_env(
      "evaluator", cfg,
      {R"(TF_CONFIG={"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "evaluator": ["127.0.0.1:3"]}, "task": {"type": "evaluator", "index": 0}})"}));
  BOOST_TEST(evaluator->wait(30) == 2);
  BOOST_TEST(evaluator->err()
               == "troupe-node: error: TF_CONFIG: /cluster/evaluator: "
                  "troupe's chief evaluates the run; leave the evaluator "
                  "out\n",
             evaluator->err());
  auto few = start_process(dir,
                           with_env("few", cfg,
                                    {"SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=3",
                                     "SLURM_STEP_NODELIST=localhost",
                                     "SLURM_STEP_TASKS_PER_NODE=3"}));
  BOOST_TEST(few->wait(30) == 2);
  BOOST_TEST(has(few->err(), "Slurm: 3 tasks, but the chief, 2 shard tasks "
                             "(/cluster/shards) and a worker task need 4: "
                             "srun -n 4 or more"),
             few->err());
}

BOOST_AUTO_TEST_SUITE_END()
