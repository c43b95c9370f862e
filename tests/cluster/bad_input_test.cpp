// Bad input to the multi-process commands: each a clear error naming what
// was wrong, a non-zero exit, and no hang. A process that must fail to start
// (a wrong name, flag or file) is started by hand, alone; where a cluster
// runs, running_cluster starts it.
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include "actors/protocol/protocol.hpp"
#include "actors/net/remote.hpp"
#include "actors/protocol/system_config.hpp"
#include "running_cluster.hpp"
#include "runtime/config/run_identity.hpp"

using namespace troupe::test;

namespace {

/// What most cases start from: the chief, a shard node and a worker node.
struct three_nodes {
  temp_dir dir;
  cluster_spec spec;
  three_nodes() { spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}}; }
};

/// Starts node `node` from `other`, written to <dir>/other.json: a version
/// of the running cluster's file that its chief does not share. The node
/// must exit 2 within 30 s, saying `says`.
void expect_stray_refused(const temp_dir& dir, const nlohmann::json& other,
                          const std::string& node, const std::string& says) {
  write_file(dir.file("other.json"), other.dump());
  process stray{dir,
                "stray",
                "troupe-node",
                {"--config", dir.file("other.json"), "--node", node}};
  BOOST_TEST(stray.wait(30) == 2);
  BOOST_TEST(has(stray.err(), says), stray.err());
}

} // namespace

BOOST_AUTO_TEST_SUITE(bad_input)

BOOST_FIXTURE_TEST_CASE(a_node_name_that_is_not_in_the_file, three_nodes) {
  auto cfg = write_cluster(dir, spec);
  process p{dir, "p", "troupe-node", {"--config", cfg, "--node", "w9"}};
  BOOST_TEST(p.wait(20) == 2);
  BOOST_TEST(has(p.err(), "unknown node \"w9\""), p.err());
  BOOST_TEST(has(p.err(), "chief, ps0, w0"), p.err());
  // Without --node a cluster file says how to start it.
  process q{dir, "q", "troupe-node", {"--config", cfg}};
  BOOST_TEST(q.wait(20) == 2);
  BOOST_TEST(has(q.err(), "start each with --node NAME"), q.err());
}

BOOST_FIXTURE_TEST_CASE(node_flags_that_do_not_fit_the_file, three_nodes) {
  auto cfg = write_cluster(dir, spec);
  // Placement comes from the file, not from flags.
  process p{dir,
            "p",
            "troupe-node",
            {"--config", cfg, "--node", "chief", "--workers", "3"}};
  BOOST_TEST(p.wait(20) == 2);
  BOOST_TEST(has(p.err(), "--workers, --shards and --mode come from the "
                          "cluster file"),
             p.err());
  // --node needs a file that has nodes.
  auto j = nlohmann::json::parse(read_all(cfg));
  j["cluster"] = {{"shards", 1}, {"workers", 1}};
  write_file(dir.file("plain.json"), j.dump());
  process q{dir,
            "q",
            "troupe-node",
            {"--config", dir.file("plain.json"), "--node", "chief"}};
  BOOST_TEST(q.wait(20) == 2);
  BOOST_TEST(has(q.err(), "--node needs a cluster file with /cluster/nodes"),
             q.err());
}

BOOST_FIXTURE_TEST_CASE(a_node_the_chiefs_file_does_not_list, three_nodes) {
  // A member started from another version of the file: the chief refuses
  // its registration and names its own nodes.
  spec.node_timeout_s = 10;
  cluster_start how;
  how.held_back = {"ps0", "w0"};
  running_cluster cluster{dir, spec, how};
  auto j = nlohmann::json::parse(read_all(cluster.config()));
  j["cluster"]["nodes"][2]["name"] = "w9";
  expect_stray_refused(dir, j, "w9",
                       "unknown node \"w9\" (the cluster file's nodes are: "
                       "chief, ps0, w0)");
  cluster.chief().kill9();
}

BOOST_FIXTURE_TEST_CASE(a_member_with_another_optimizer_is_refused,
                        three_nodes) {
  // w0 started from a copy of the file with another optimizer: refused,
  // the differing keys named on both sides; the run goes on once w0 comes
  // with the right file.
  spec.epochs = 1;
  cluster_start how;
  how.chief_flags = {"--max-steps", "100"};
  how.held_back = {"w0"};
  running_cluster cluster{dir, spec, how};
  auto& chief = cluster.chief();
  auto j = nlohmann::json::parse(read_all(cluster.config()));
  j["training"]["optimizer"] = {{"type", "sgd"}, {"learning_rate", 0.001}};
  expect_stray_refused(dir, j, "w0",
                       "its config differs from the chief's: "
                       "/training/optimizer/type (chief: adam, node w0: sgd)");
  BOOST_TEST(chief.wait_for_output("refused node w0: its config differs", 10),
             chief.out());
  auto& w0 = cluster.start_node("w0");
  cluster.require_finished(120); // ps0 and w0 too
  BOOST_TEST(has(w0.out(), "registered with the chief (run "), w0.out());
}

BOOST_FIXTURE_TEST_CASE(a_registration_out_of_bounds_gets_an_error_reply,
                        three_nodes) {
  // What troupe-node's flags never send, sent as a CAF message: a join
  // with 2^31-1 workers (the chief died of bad_alloc once), a negative
  // count, a name of 10,000 characters. Each gets an error reply; the run
  // goes on.
  cluster_start how;
  how.chief_flags = {"--max-steps", "300"};
  running_cluster cluster{dir, spec, how};
  cluster.require_step(50);
  auto cfg = troupe::parse_run_config(read_all(cluster.config()),
                                      cluster.config());
  BOOST_REQUIRE(cfg);
  auto identity = troupe::identity_text(troupe::training_identity(*cfg));
  caf::actor_system_config sys_cfg;
  troupe::init_config(sys_cfg);
  troupe::init_network(sys_cfg, troupe::cluster_config{});
  caf::actor_system sys{sys_cfg};
  // A member that holds the key (the user's, as the nodes found it).
  auto key = troupe::load_key(troupe::default_key_path());
  BOOST_REQUIRE_MESSAGE(key, troupe::test::why(key));
  troupe::guard_links(sys, troupe::make_key_guard(*key), false);
  auto h = troupe::connect_to<troupe::chief_actor>(
    sys, "127.0.0.1", spec.nodes[0].port, std::chrono::seconds(10));
  BOOST_REQUIRE(h);
  struct ask {
    std::string name;
    int32_t workers;
    std::string says;
    std::string run{};
  } asks[] = {{"", 2147483647, "a join with 2147483647 workers (at most 1024"},
              {"", -5, "a join with -5 workers"},
              {std::string(10000, 'x'), 1, "a node name of 10000 characters"},
              {"w 1", 1, "a node name with a space"},
              {"", 1, "a run id of 100000 characters",
               std::string(100000, 'r')}};
  for (auto& a : asks) {
    caf::scoped_actor self{sys};
    std::string reply;
    self
      ->request(*h, std::chrono::seconds(10), troupe::register_atom_v,
                troupe::node_registration{
                  a.name, "127.0.0.1", 0, {}, a.workers, 0, identity, a.run})
      .receive([&](std::string&, std::string&) { reply = "accepted"; },
               [&](caf::error& e) { reply = troupe::describe(e); });
    BOOST_TEST(has(reply, a.says), reply);
  }
  // Node ps0 of the file is up: another process naming itself ps0 is
  // refused; ps0's own agent asking again (a node back from a lost chief
  // whose last try went unanswered) is told what it was told the first
  // time, and nothing changes.
  auto ps0 = troupe::connect_to<troupe::node_agent_actor>(
    sys, "127.0.0.1", spec.nodes[1].port, std::chrono::seconds(10));
  BOOST_REQUIRE(ps0);
  for (bool own : {false, true}) {
    caf::scoped_actor self{sys};
    std::string reply;
    self
      ->request(*h, std::chrono::seconds(10), troupe::register_atom_v,
                troupe::node_registration{
                  "ps0", "127.0.0.1", spec.nodes[1].port,
                  own ? *ps0 : troupe::node_agent_actor{}, -1, 0, identity, ""})
      .receive([&](std::string& name,
                   std::string& run) { reply = name + " in run " + run; },
               [&](caf::error& e) { reply = troupe::describe(e); });
    if (own)
      BOOST_TEST(has(reply, "ps0 in run "), reply);
    else
      BOOST_TEST(has(reply, "node \"ps0\" is already up"), reply);
  }
  cluster.require_finished(120);
  auto out = cluster.chief().out();
  BOOST_TEST(count_of(out, "node ps0 (") == 1u, out);
}

BOOST_FIXTURE_TEST_CASE(a_cluster_file_whose_chief_names_an_unknown_node,
                        three_nodes) {
  auto cfg = write_cluster(dir, spec);
  auto j = nlohmann::json::parse(read_all(cfg));
  j["cluster"]["chief"] = "boss";
  write_file(cfg, j.dump());
  process p{dir, "p", "troupe-node", {"--config", cfg, "--node", "chief"}};
  BOOST_TEST(p.wait(20) == 2);
  BOOST_TEST(has(p.err(), "/cluster/chief: unknown node \"boss\""), p.err());
}

BOOST_FIXTURE_TEST_CASE(a_port_in_use, three_nodes) {
  held_port held; // as another program would
  BOOST_REQUIRE(held.port() > 0);
  spec.nodes[1].port = held.port();
  auto cfg = write_cluster(dir, spec);
  process ps0{dir, "ps0", "troupe-node", {"--config", cfg, "--node", "ps0"}};
  // Bad input, as the exit codes say: 2, and the error said once.
  BOOST_TEST(ps0.wait(20) == 2);
  const auto said = "cannot listen on 127.0.0.1:"
                    + std::to_string(spec.nodes[1].port);
  BOOST_TEST(has(ps0.err(), said), ps0.err());
  BOOST_TEST(ps0.err().find(said) == ps0.err().rfind(said), ps0.err());
  spec.nodes[0].port = spec.nodes[1].port; // the chief's port, too
  spec.nodes[1].port = 0;
  cfg = write_cluster(dir, spec);
  process chief{
    dir, "chief", "troupe-node", {"--config", cfg, "--node", "chief"}};
  BOOST_TEST(chief.wait(20) == 2);
  BOOST_TEST(has(chief.err(), "cannot listen on"), chief.err());
  BOOST_TEST(chief.err().find("cannot listen on")
               == chief.err().rfind("cannot listen on"),
             chief.err());
  // A fixed data-plane port that another program holds: the same.
  spec.nodes[0].port = 0;
  cfg = write_cluster(dir, spec);
  process w0{dir,
             "w0",
             "troupe-node",
             {"--config", cfg, "--node", "w0", "--data-port",
              std::to_string(held.port())}};
  BOOST_TEST(w0.wait(20) == 2);
  BOOST_TEST(has(w0.err(), "cannot listen for the data plane on 127.0.0.1:"
                             + std::to_string(held.port())),
             w0.err());
}

BOOST_FIXTURE_TEST_CASE(bad_tls_files_stop_a_node_before_it_starts,
                        three_nodes) {
  spec.tls_dir = make_certs(dir, "certs", {"cluster", "client"});
  auto other = make_certs(dir, "other", {"cluster"});
  BOOST_REQUIRE(!spec.tls_dir.empty() && !other.empty());
  auto cfg = write_cluster(dir, spec);
  auto j = nlohmann::json::parse(read_all(cfg));
  // A key that is not the certificate's; a certificate of another CA; a
  // missing CA file. Each: exit 2, the file named, nothing listening.
  struct bad {
    std::vector<std::pair<const char*, std::string>> set;
    std::string value;
    std::string says;
  } cases[] = {
    {{{"key", other + "/cluster.key"}},
     other + "/cluster.key",
     "does not belong to certificate"},
    {{{"certificate", other + "/cluster.pem"}, {"key", other + "/cluster.key"}},
     other + "/cluster.pem",
     "not accepted by the CA"},
    {{{"ca", dir.file("nowhere.pem")}},
     dir.file("nowhere.pem"),
     "No such file"},
  };
  for (auto& c : cases) {
    auto k = j;
    for (auto& [key, value] : c.set)
      k["cluster"]["tls"][key] = value;
    write_file(dir.file("bad.json"), k.dump());
    process p{dir,
              "p",
              "troupe-node",
              {"--config", dir.file("bad.json"), "--node", "ps0"}};
    BOOST_TEST(p.wait(20) == 2, c.says);
    BOOST_TEST(has(p.err(), c.value), p.err());
    BOOST_TEST(has(p.err(), c.says), p.err());
  }
  // --insecure and TLS together make no sense.
  process q{
    dir, "q", "troupe-node", {"--config", cfg, "--node", "ps0", "--insecure"}};
  BOOST_TEST(q.wait(20) == 2);
  BOOST_TEST(has(q.err(), "--insecure and TLS exclude each other"), q.err());
}

BOOST_AUTO_TEST_CASE(on_every_interface_a_node_listens_behind_the_cluster_key) {
  // Plaintext beyond loopback needs --insecure; by default every port is
  // behind the key (front_door_test sends it strangers' bytes).
  temp_dir dir;
  cluster_spec spec;
  spec.nodes = {{"chief", 1, 1}};
  spec.nodes[0].host = "0.0.0.0"; // every interface
  cluster_start how;
  how.chief_flags = {"--max-steps", "50"};
  {
    running_cluster cluster{dir, spec, how};
    cluster.require_finished(120);
    auto& p = cluster.chief();
    BOOST_TEST(has(p.out(), "links: cluster key "), p.out());
  }
  // --insecure says so on every line of the run's log.
  how.chief_flags = {"--insecure", "--max-steps", "150"};
  running_cluster cluster{dir, spec, how};
  cluster.require_finished(120);
  auto& q = cluster.chief();
  BOOST_TEST(has(q.out(), "links: INSECURE: plaintext links"), q.out());
  BOOST_TEST(has(q.out(), "\n[INSECURE links] step "), q.out());
  BOOST_TEST(!has(q.out(), "\nstep "), q.out());
  BOOST_TEST(test_accuracy(q.out()) > 0.5, q.out()); // the table is as ever
}

BOOST_FIXTURE_TEST_CASE(a_node_that_never_comes_up, three_nodes) {
  spec.node_timeout_s = 6; // room for a loaded machine to start ps0
  cluster_start how;
  how.held_back = {"w0"};
  running_cluster cluster{dir, spec, how};
  auto& chief = cluster.chief();
  auto& ps0 = cluster.node("ps0");
  BOOST_TEST(chief.wait(40) == 1);
  BOOST_TEST(has(chief.err(), "did not come up within 6 s: w0 (127.0.0.1:"
                                + std::to_string(spec.nodes[2].port) + ")"),
             chief.err());
  // The node that did come up is told why the run failed, and exits 1.
  BOOST_TEST(ps0.wait(20) == 1, ps0.err());
  BOOST_TEST(has(ps0.err(), "node ps0: the run failed: these nodes did not "
                            "come up within 6 s"),
             ps0.err());
  // A member whose chief never comes up gives up after the same timeout.
  auto& lonely = cluster.start_node("w0", "lonely");
  BOOST_TEST(lonely.wait(30) == 1);
  BOOST_TEST(has(lonely.err(), "cannot reach the chief (node chief at "
                               "127.0.0.1:"),
             lonely.err());
}

BOOST_AUTO_TEST_CASE(join_with_an_unreachable_chief) {
  temp_dir dir;
  auto where = "127.0.0.1:" + std::to_string(free_port());
  process p{dir,
            "p",
            "troupe-node",
            {"--join", where, "--workers", "1", "--timeout", "1"}};
  BOOST_TEST(p.wait(20) == 1);
  BOOST_TEST(has(p.err(), "cannot reach the chief at " + where), p.err());
  process q{dir, "q", "troupe-node", {"--join", where}};
  BOOST_TEST(q.wait(20) == 2);
  BOOST_TEST(has(q.err(), "--join needs --workers N"), q.err());
}

BOOST_AUTO_TEST_SUITE_END()
