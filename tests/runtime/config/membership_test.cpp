// A cluster's nodes from the scheduler's environment
// (runtime/config/membership.hpp): TF_CONFIG as Kubeflow's TFJob writes
// it, Slurm's step variables, their host lists and task counts, and the
// errors for what does not fit.
#include "runtime/config/membership.hpp"

#include <boost/test/unit_test.hpp>

#include <map>

#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;

namespace {

const char* tfjob_cluster = R"("cluster": {
    "chief": ["run-chief-0.ns.svc:2222"],
    "ps": ["run-ps-0.ns.svc:2222", "run-ps-1.ns.svc:2222"],
    "worker": ["run-worker-0.ns.svc:2222", "run-worker-1.ns.svc:2222",
               "run-worker-2.ns.svc:2222"]})";

std::string tf_config(const std::string& type, int index,
                      const std::string& cluster = tfjob_cluster) {
  return "{" + cluster + R"(, "task": {"type": ")" + type + R"(", "index": )"
         + std::to_string(index) + "}}";
}

/// The error's text, or "" when there was none.
template <class T>
std::string error_of(const caf::expected<T>& x) {
  return x ? std::string{} : describe(x.error());
}

/// A fake environment.
struct environment {
  std::map<std::string, std::string> vars;
  env_lookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

environment srun(int procid, int ntasks, const std::string& nodes,
                 const std::string& per_node) {
  return {{{"SLURM_PROCID", std::to_string(procid)},
           {"SLURM_STEP_NUM_TASKS", std::to_string(ntasks)},
           {"SLURM_STEP_NODELIST", nodes},
           {"SLURM_STEP_TASKS_PER_NODE", per_node},
           {"SLURM_DISTRIBUTION", "block"}}};
}

} // namespace

BOOST_AUTO_TEST_SUITE(membership)

BOOST_AUTO_TEST_CASE(the_environment_names_its_source) {
  environment none;
  BOOST_TEST((membership_in(none.lookup()) == membership_source::config));
  // A batch script's own step (no srun) and a one-task step: the config.
  environment batch{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}};
  BOOST_TEST((membership_in(batch.lookup()) == membership_source::config));
  environment one = srun(0, 1, "n1", "1");
  BOOST_TEST((membership_in(one.lookup()) == membership_source::config));
  BOOST_TEST((membership_in(srun(0, 4, "n1", "4").lookup())
              == membership_source::slurm));
  environment both = srun(0, 4, "n1", "4");
  both.vars["TF_CONFIG"] = tf_config("ps", 0);
  BOOST_TEST((membership_in(both.lookup()) == membership_source::tf_config));
  environment empty{{{"TF_CONFIG", ""}}};
  BOOST_TEST((membership_in(empty.lookup()) == membership_source::config));
}

BOOST_AUTO_TEST_CASE(tf_config_places_ps_and_worker_tasks) {
  cluster_config c; // shards 2, workers 2 by default
  auto m = membership_from_tf_config(tf_config("worker", 2), c);
  BOOST_REQUIRE_MESSAGE(m, error_of(m));
  BOOST_TEST(m->node == "worker2");
  BOOST_TEST(c.chief_node == "chief");
  BOOST_REQUIRE(c.nodes.size() == 6u);
  BOOST_TEST(c.nodes[0].name == "chief");
  BOOST_TEST(c.nodes[0].host == "run-chief-0.ns.svc");
  BOOST_TEST(c.nodes[0].port == 2222);
  BOOST_TEST(c.nodes[0].shards + c.nodes[0].workers == 0);
  BOOST_TEST(c.nodes[2].name == "ps1");
  BOOST_TEST(c.nodes[2].shards == 1);
  // Three worker tasks, a config of two workers: one each.
  BOOST_TEST(c.nodes[5].name == "worker2");
  BOOST_TEST(c.nodes[5].workers == 1);
  BOOST_TEST(c.shards == 2);
  BOOST_TEST(c.workers == 3);
  // Kernel-chosen data ports without an offset.
  BOOST_TEST(c.nodes[3].data_port == 0);
  BOOST_TEST(m->summary
             == "the chief on chief (run-chief-0.ns.svc:2222); "
                "shards on ps0, ps1 (2); workers on worker0, "
                "worker1, worker2 (3)");
}

BOOST_AUTO_TEST_CASE(tf_config_spreads_counts_and_takes_an_offset) {
  cluster_config c;
  c.shards = 5;
  c.workers = 7;
  c.data_port_offset = 1;
  auto m = membership_from_tf_config(tf_config("ps", 1), c);
  BOOST_REQUIRE_MESSAGE(m, error_of(m));
  BOOST_TEST(m->node == "ps1");
  BOOST_TEST(c.nodes[1].shards == 3); // 5 over 2: 3 and 2
  BOOST_TEST(c.nodes[2].shards == 2);
  BOOST_TEST(c.nodes[3].workers == 3); // 7 over 3: 3, 2, 2
  BOOST_TEST(c.nodes[5].workers == 2);
  BOOST_TEST(c.shards == 5);
  BOOST_TEST(c.workers == 7);
  for (auto& n : c.nodes)
    BOOST_TEST(n.data_port == 2223);
}

BOOST_AUTO_TEST_CASE(tf_config_without_a_chief_makes_worker_0_the_chief) {
  cluster_config c;
  auto m = membership_from_tf_config(
    tf_config("worker", 0,
              R"("cluster": {"ps": ["h0:1"], "worker": ["h1:2"]})"),
    c);
  BOOST_REQUIRE_MESSAGE(m, error_of(m));
  BOOST_TEST(c.chief_node == "worker0");
  BOOST_TEST(m->node == "worker0");
  // "master", TensorFlow's older name for the chief.
  cluster_config d;
  auto master = membership_from_tf_config(
    tf_config("master", 0, R"("cluster": {"master": ["h:1"], "ps": ["h:2"],
                                           "worker": ["h:3"]})"),
    d);
  BOOST_REQUIRE_MESSAGE(master, error_of(master));
  BOOST_TEST(master->node == "chief");
}

BOOST_AUTO_TEST_CASE(a_bad_tf_config_is_named) {
  auto refused = [](const std::string& text) {
    cluster_config c;
    return error_of(membership_from_tf_config(text, c));
  };
  BOOST_TEST(refused("{").find("TF_CONFIG: invalid JSON") == 0u, refused("{"));
  BOOST_TEST(refused(R"({"cluster": {}})").find("TF_CONFIG: expected") == 0u);
  BOOST_TEST(
    refused(tf_config("evaluator", 0, R"("cluster": {"evaluator": ["h:1"]})"))
    == "TF_CONFIG: /cluster/evaluator: troupe's chief evaluates "
       "the run; leave the evaluator out");
  BOOST_TEST(refused(tf_config("ps", 0, R"("cluster": {"ps": ["h:1"]})"))
             == "TF_CONFIG: no \"worker\" tasks; the run needs at least one");
  BOOST_TEST(
    refused(tf_config("worker", 0, R"("cluster": {"worker": ["h:1"]})"))
    == "TF_CONFIG: no \"ps\" tasks; the shards need at least one");
  BOOST_TEST(refused(tf_config(
               "ps", 0, R"("cluster": {"ps": ["h"], "worker": ["h:2"]})"))
             == "TF_CONFIG: /cluster/ps/0: expected HOST:PORT, got \"h\"");
  BOOST_TEST(refused(tf_config("worker", 3))
             == "TF_CONFIG: /task/index: 3, but /cluster/worker lists 3 "
                "tasks");
  BOOST_TEST(refused(tf_config("sidecar", 0))
             == "TF_CONFIG: /task/type: \"sidecar\" has no tasks in /cluster");
  BOOST_TEST(refused(tf_config(
               "ps", 0, R"("cluster": {"ps": ["h:1"], "worker": ["h:1"]})"))
             == "TF_CONFIG: node \"worker0\"'s port 1 on h is already node "
                "\"ps0\"'s port");
  BOOST_TEST(
    refused(tf_config(
      "ps", 0,
      R"("cluster": {"ps": ["h:1"], "worker": ["h:2"], "chief": ["a:1", "b:1"]})"))
    == "TF_CONFIG: 2 chief (or master) tasks; a run has one");
}

BOOST_AUTO_TEST_CASE(an_offset_that_clashes_is_named) {
  cluster_config c;
  c.data_port_offset = 1;
  auto m = membership_from_tf_config(
    tf_config("ps", 0,
              R"("cluster": {"ps": ["h:7400"], "worker": ["h:7401"]})"),
    c);
  BOOST_TEST(error_of(m)
             == "TF_CONFIG: node \"worker0\"'s port 7401 on h is already node "
                "\"ps0\"'s data_port");
}

BOOST_AUTO_TEST_CASE(slurm_places_tasks_by_block_distribution) {
  cluster_config c; // 2 shards
  c.workers = 3;
  // 6 tasks on three hosts: 2, 2, 2.
  auto m = membership_from_slurm(srun(4, 6, "node[01-03]", "2(x3)").lookup(),
                                 c);
  BOOST_REQUIRE_MESSAGE(m, error_of(m));
  BOOST_TEST(m->node == "worker1");
  BOOST_REQUIRE(c.nodes.size() == 6u);
  const char* names[] = {"chief",   "ps0",     "ps1",
                         "worker0", "worker1", "worker2"};
  const char* hosts[] = {"node01", "node01", "node02",
                         "node02", "node03", "node03"};
  for (int i = 0; i < 6; ++i) {
    BOOST_TEST(c.nodes[i].name == names[i]);
    BOOST_TEST(c.nodes[i].host == hosts[i]);
    BOOST_TEST(c.nodes[i].port == 7400 + 2 * i);
    BOOST_TEST(c.nodes[i].data_port == 7401 + 2 * i);
  }
  BOOST_TEST(c.nodes[1].shards == 1);
  BOOST_TEST(c.workers == 3);
  BOOST_TEST(c.shards == 2);
  // Uneven hosts, and the job's node list when the step's is missing.
  auto env = srun(0, 4, "", "3,1");
  env.vars.erase("SLURM_STEP_NODELIST");
  env.vars["SLURM_JOB_NODELIST"] = "a,b";
  env.vars.erase("SLURM_DISTRIBUTION");
  cluster_config d;
  d.shards = 1;
  d.base_port = 9000;
  auto k = membership_from_slurm(env.lookup(), d);
  BOOST_REQUIRE_MESSAGE(k, error_of(k));
  BOOST_TEST(d.nodes[2].host == "a");
  BOOST_TEST(d.nodes[3].host == "b");
  BOOST_TEST(d.nodes[3].port == 9006);
  BOOST_TEST(d.workers == 2); // the config's 2 over 2 worker tasks
}

// The chief hands joiners its config with the nodes the environment gave:
// read back, they place the same nodes, so the identities agree.
BOOST_AUTO_TEST_CASE(node_settings_write_the_nodes_into_the_config) {
  cluster_config c;
  c.data_port_offset = 1;
  auto m = membership_from_tf_config(tf_config("worker", 1), c);
  BOOST_REQUIRE(m);
  const std::string text = R"({"model": {"type": "mlp"},
    "data": {"format": "synthetic"},
    "cluster": {"shards": 2, "workers": 2, "data_port_offset": 1}})";
  auto with_nodes = apply_settings(text, "t", node_settings(c));
  BOOST_REQUIRE(with_nodes);
  auto back = parse_run_config(*with_nodes, "t");
  BOOST_REQUIRE_MESSAGE(back, error_of(back));
  auto& b = back->cluster;
  BOOST_TEST(b.chief_node == "chief");
  BOOST_TEST(b.shards == 2);
  BOOST_TEST(b.workers == 3);
  BOOST_REQUIRE(b.nodes.size() == c.nodes.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    BOOST_TEST(b.nodes[i].name == c.nodes[i].name);
    BOOST_TEST(b.nodes[i].host == c.nodes[i].host);
    BOOST_TEST(b.nodes[i].port == c.nodes[i].port);
    BOOST_TEST(b.nodes[i].data_port == c.nodes[i].data_port);
    BOOST_TEST(b.nodes[i].shards == c.nodes[i].shards);
    BOOST_TEST(b.nodes[i].workers == c.nodes[i].workers);
  }
}

BOOST_AUTO_TEST_CASE(slurm_refusals_say_what_to_change) {
  auto refused = [](const environment& env, int shards = 2) {
    cluster_config c;
    c.shards = shards;
    return error_of(membership_from_slurm(env.lookup(), c));
  };
  BOOST_TEST(refused(srun(0, 3, "n1", "3"))
             == "Slurm: 3 tasks, but the chief, 2 shard tasks "
                "(/cluster/shards) and a worker task need 4: srun -n 4 or "
                "more");
  auto cyclic = srun(0, 4, "n[1-2]", "2(x2)");
  cyclic.vars["SLURM_DISTRIBUTION"] = "cyclic";
  BOOST_TEST(refused(cyclic).find("Slurm: SLURM_DISTRIBUTION is \"cyclic\"")
             == 0u);
  // With one task per node every distribution places tasks alike.
  auto spread = srun(1, 4, "n[1-4]", "1(x4)");
  spread.vars["SLURM_DISTRIBUTION"] = "cyclic";
  BOOST_TEST(refused(spread) == "");
  BOOST_TEST(refused(srun(0, 4, "n[1-2]", "3"))
             == "Slurm: SLURM_STEP_TASKS_PER_NODE \"3\" does not place 4 "
                "tasks on the 2 hosts of \"n[1-2]\"");
  BOOST_TEST(refused(srun(0, 4, "n[1-", "4"))
             == "Slurm: SLURM_STEP_NODELIST: a '[' without its ']' in "
                "\"n[1-\"");
  auto bad_id = srun(0, 4, "n1", "4");
  bad_id.vars["SLURM_PROCID"] = "4";
  BOOST_TEST(refused(bad_id).find("Slurm: SLURM_PROCID \"4\"") == 0u);
}

BOOST_AUTO_TEST_CASE(host_lists_expand_as_slurm_writes_them) {
  auto hosts = expand_host_list("node[01-03,7],gpu2,r[1-2]n[8-9]");
  BOOST_REQUIRE_MESSAGE(hosts, error_of(hosts));
  // Each range keeps its own width, as Slurm's hostlist does.
  std::vector<std::string> want{"node01", "node02", "node03", "node7", "gpu2",
                                "r1n8",   "r1n9",   "r2n8",   "r2n9"};
  BOOST_TEST(*hosts == want, boost::test_tools::per_element());
  for (auto bad :
       {"", "a,,b", "n[3-1]", "n[x]", "n]", "n[1-2", "n[[1]]", "n[0-99999999]"})
    BOOST_TEST(!expand_host_list(bad), bad);
  auto counts = expand_tasks_per_node("2(x3),1");
  BOOST_REQUIRE(counts);
  BOOST_TEST(*counts == (std::vector<int>{2, 2, 2, 1}),
             boost::test_tools::per_element());
  for (auto bad : {"", "0", "2(x0)", "2(x", "a", "1,,1", "1(x99999)"})
    BOOST_TEST(!expand_tasks_per_node(bad), bad);
}

BOOST_AUTO_TEST_SUITE_END()
