// The config reader's "cluster" section: nodes, their TLS files and
// devices, replicas (the suite "config", with config_test.cpp).
#include "runtime/config/config.hpp"

#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <dirent.h>
#include <thread>

#include "runtime/base/errc.hpp"
#include "runtime/config/config_text.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(config)

BOOST_AUTO_TEST_CASE(cluster_section) {
  auto cfg = parse_run_config(synthetic_config, "cfg.json");
  BOOST_REQUIRE(cfg);
  BOOST_TEST(cfg->cluster.shards == 2); // defaults without a cluster section
  BOOST_TEST((cfg->cluster.consistency == cluster_config::mode::async));
  auto text = replace_first(
    synthetic_config, R"("name": "t",)",
    R"("name": "t", "cluster": { "workers": 3, "shards": 1,
                         "mode": "easgd", "tau": 5, "max_restarts": 2 },)");
  cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST((cfg->cluster.consistency == cluster_config::mode::easgd));
  BOOST_TEST(cfg->cluster.workers == 3);
  BOOST_TEST(cfg->cluster.max_restarts == 2);
  BOOST_TEST(cfg->cluster.elastic_rate() == 0.9 / 5 / 3);
  BOOST_TEST(cfg->cluster.aggregate() == 3);
  text = replace_first(synthetic_config, R"("name": "t",)",
                       R"("name": "t", "cluster": { "workers": 3,
                    "mode": "sync", "replicas_to_aggregate": 5 },)");
  BOOST_TEST(error_of(text)
             == "cfg.json: /cluster/replicas_to_aggregate: must be <= number "
                "of workers (3), got 5");
  text = replace_first(synthetic_config, R"("name": "t",)",
                       R"("name": "t", "cluster": { "mode": "downpour" },)");
  BOOST_TEST(
    error_of(text)
    == R"(cfg.json: /cluster/mode: expected one of async|sync|ssp|easgd, found "downpour")");
  text = replace_first(synthetic_config, R"("name": "t",)",
                       R"("name": "t", "cluster": { "worker": 2 },)");
  BOOST_TEST(error_of(text)
             == R"(cfg.json: /cluster/worker: unknown key "worker")");
}

BOOST_AUTO_TEST_CASE(cluster_nodes_place_shards_and_workers) {
  auto text = replace_first(synthetic_config, R"("training")", R"("cluster": {
    "chief": "head",
    "nodes": [ { "name": "head", "port": 7000 },
               { "name": "ps", "host": "10.0.0.2", "port": 7000, "shards": 2 },
               { "name": "w", "host": "10.0.0.3", "port": 7001, "workers": 3 } ],
    "on_node_loss": "wait" },
  "training")");
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  auto& c = cfg->cluster;
  BOOST_TEST(c.distributed());
  BOOST_TEST(c.shards == 2);
  BOOST_TEST(c.workers == 3);
  BOOST_TEST(c.chief_node == "head");
  BOOST_TEST(c.node("head")->host == "127.0.0.1"); // the default
  BOOST_TEST(c.node("w")->port == 7001);
  BOOST_TEST((c.on_node_loss == cluster_config::node_loss::wait));
  BOOST_TEST((c.stale_lr == cluster_config::stale_rate::divide)); // default
  BOOST_TEST(
    (c.stale_momentum == cluster_config::stale_momentum_rule::none)); // default
  BOOST_TEST((c.sync_lr == cluster_config::sync_rate::sqrt));         // default
  BOOST_TEST(c.delay_compensation == 0);                              // default
  // "auto" with the momentum optimizer: the exact order (see below)
  BOOST_TEST(!c.prefetch);
  BOOST_TEST(c.stale_lookahead == 0);
}

BOOST_AUTO_TEST_CASE(prefetch_auto_is_on_where_the_exchange_crosses_processes) {
  auto nodes = std::string{R"("nodes": [ { "name": "head", "port": 7000 },
               { "name": "ps", "port": 7001, "shards": 2 },
               { "name": "w", "port": 7002, "workers": 3 } ])"};
  auto read = [](const std::string& cluster, const std::string& model,
                 const std::string& optimizer = "adam") {
    auto text = replace_first(synthetic_config, R"("training")",
                              R"("cluster": { "chief": "head", )" + cluster
                                + " },\n  \"training\"");
    text = replace_first(text, R"("type": "mlp", "hidden": [8])", model);
    text = replace_first(text, R"("type": "momentum",
                "learning_rate": 0.1, "momentum": 0.5,)",
                         R"("type": ")" + optimizer + R"(",)");
    auto cfg = parse_run_config(text, "cfg.json");
    BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
    return std::pair{cfg->cluster.prefetch, cfg->cluster.stale_lookahead};
  };
  auto mlp = std::string{R"("type": "mlp", "hidden": [8])"};
  using result = std::pair<bool, double>;
  BOOST_TEST((read(nodes, mlp) == result{true, 1}));
  BOOST_TEST((read(nodes + R"(, "prefetch": "auto")", mlp) == result{true, 1}));
  // what the file says stays
  BOOST_TEST((read(nodes + R"(, "prefetch": false)", mlp) == result{false, 0}));
  BOOST_TEST(
    (read(nodes + R"(, "stale_lookahead": 0)", mlp) == result{true, 0}));
  BOOST_TEST(
    (read(nodes + R"(, "prefetch": false, "stale_lookahead": "auto")", mlp)
     == result{false, 0}));
  BOOST_TEST((read(nodes + R"(, "prefetch": false, "stale_lookahead": 2)", mlp)
              == result{false, 2}));
  // only async workers prefetch
  BOOST_TEST((read(nodes + R"(, "mode": "sync")", mlp) == result{false, 0}));
  BOOST_TEST((read(nodes + R"(, "mode": "ssp")", mlp) == result{false, 0}));
  // and only with Adam, whose steps keep their direction for the look-ahead
  BOOST_TEST((read(nodes, mlp, "sgd") == result{false, 0}));
  BOOST_TEST((read(nodes, mlp, "momentum") == result{false, 0}));
  BOOST_TEST(
    (read(nodes + R"(, "prefetch": true)", mlp, "sgd") == result{true, 1}));
  // a Python step keeps its own thread unless the file asks
  troupe::test::temp_dir dir;
  auto params = dir.file("model.safetensors");
  troupe::test::write_file(params, "");
  auto external = R"({ "name": "t",
    "model": { "type": "external", "parameters": ")"
                  + params + R"(" },
    "data": { "format": "external", "train_samples": 600, "test_samples": 100 },
    "cluster": { "chief": "head", )"
                  + nodes + " } }";
  auto cfg = parse_run_config(external, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(!cfg->cluster.prefetch);
  BOOST_TEST(cfg->cluster.stale_lookahead == 0);
  // one process keeps its exact order; a prefetch asked for there looks
  // ahead too
  cfg = parse_run_config(synthetic_config, "cfg.json");
  BOOST_REQUIRE(cfg);
  BOOST_TEST(!cfg->cluster.prefetch);
  BOOST_TEST(cfg->cluster.stale_lookahead == 0);
  cfg = parse_run_config(replace_first(synthetic_config, R"("name": "t",)",
                                       R"("name": "t",
                           "cluster": { "prefetch": true },)"),
                         "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->cluster.prefetch);
  BOOST_TEST(cfg->cluster.stale_lookahead == 1);
}

BOOST_AUTO_TEST_CASE(bad_cluster_nodes_name_the_path) {
  auto with = [](const std::string& cluster) {
    return error_of(
      replace_first(synthetic_config, R"("training")",
                    "\"cluster\": " + cluster + ", \"training\""));
  };
  auto ok_nodes = std::string{R"([ { "name": "a", "port": 7000, "shards": 1 },
                                   { "name": "b", "port": 7001, "workers": 1 } ])"};
  BOOST_TEST(with(R"({ "nodes": [] })")
               .find("/cluster/nodes: expected a "
                     "non-empty array")
             != std::string::npos);
  BOOST_TEST(with(R"({ "nodes": [ { "name": "a", "port": 7000, "shards": 1 },
                                  { "name": "a", "port": 7001, "workers": 1 } ] })")
               .find("/cluster/nodes/1/name: node \"a\" is listed twice")
             != std::string::npos);
  // What the chief would refuse at registration is refused here.
  BOOST_TEST(with(R"({ "nodes": [ { "name": "a b", "port": 7000, "shards": 1 },
                                  { "name": "c", "port": 7001, "workers": 1 } ] })")
               .find("/cluster/nodes/0/name: expected a name of 1 to 64 "
                     "printable ASCII characters without spaces")
             != std::string::npos);
  BOOST_TEST(with(R"({ "nodes": [ { "name": "a", "port": 7000, "shards": 1 },
                                  { "name": "b", "port": 7000, "workers": 1 } ] })")
               .find("/cluster/nodes/1/port: 127.0.0.1:7000 is already node "
                     "\"a\"'s")
             != std::string::npos);
  BOOST_TEST(with(R"({ "nodes": [ { "name": "a", "port": 70000 } ] })")
               .find("/cluster/nodes/0/port")
             != std::string::npos);
  // Data-plane ports: given, or the control port plus an offset; none
  // may take another port of its host.
  BOOST_TEST(with(R"({ "data_port_offset": 1, "nodes": )" + ok_nodes + " }")
               .find("/cluster/nodes: node \"b\"'s port 7001 on "
                     "127.0.0.1 is already node \"a\"'s data_port")
             != std::string::npos);
  BOOST_TEST(with(R"({ "nodes": [ { "name": "a", "port": 7000, "shards": 1,
                                    "data_port": 7100 },
                                  { "name": "b", "port": 7001, "workers": 1,
                                    "data_port": 7100 } ] })")
               .find("node \"b\"'s data_port 7100 on 127.0.0.1 is already "
                     "node \"a\"'s data_port")
             != std::string::npos);
  BOOST_TEST(with(R"({ "data_port_offset": 65000, "nodes": )" + ok_nodes + " }")
               .find("/cluster/data_port_offset: node \"a\"'s port 7000 plus "
                     "65000 is beyond 65535")
             != std::string::npos);
  {
    auto cfg = parse_run_config(
      replace_first(synthetic_config, R"("training")",
                    R"("cluster": { "data_port_offset": 100, "nodes": [
                   { "name": "a", "port": 7000, "shards": 1 },
                   { "name": "b", "port": 7001, "workers": 1,
                     "data_port": 9000 } ] }, "training")"),
      "cfg.json");
    BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
    BOOST_TEST(cfg->cluster.node("a")->data_port == 7100);
    BOOST_TEST(cfg->cluster.node("b")->data_port == 9000);
  }
  BOOST_TEST(
    with(R"({ "nodes": [ { "name": "a", "port": 7000, "workers": 1 } ] })")
      .find("no node holds a shard")
    != std::string::npos);
  BOOST_TEST(with(R"({ "chief": "z", "nodes": )" + ok_nodes + " }")
               .find("/cluster/chief: unknown node \"z\" (the nodes are: a, b)")
             != std::string::npos);
  BOOST_TEST(
    with(R"({ "workers": 4, "nodes": )" + ok_nodes + " }")
      .find("/cluster/workers: must equal the workers of the nodes (1)")
    != std::string::npos);
  BOOST_TEST(with(R"({ "chief": "a" })").find("/cluster/chief: needs \"nodes\"")
             != std::string::npos);
  BOOST_TEST(with(R"({ "stale_lr": "sqrt" })").find("/cluster/stale_lr")
             != std::string::npos);
  BOOST_TEST(
    with(R"({ "stale_momentum": "halve" })").find("/cluster/stale_momentum")
    != std::string::npos);
  BOOST_TEST(with(R"({ "sync_lr": "cubic" })").find("/cluster/sync_lr")
             != std::string::npos);
  BOOST_TEST(with(R"({ "sync_warmup": -5 })").find("/cluster/sync_warmup")
             != std::string::npos);
  BOOST_TEST(
    with(R"({ "delay_compensation": -1 })").find("/cluster/delay_compensation")
    != std::string::npos);
  BOOST_TEST(
    with(R"({ "stale_lookahead": -1 })").find("/cluster/stale_lookahead")
    != std::string::npos);
  BOOST_TEST(with(R"({ "stale_lookahead": "far" })")
               .find(R"(/cluster/stale_lookahead: expected "auto" or a number)")
             != std::string::npos);
  BOOST_TEST(
    with(R"({ "prefetch": "yes" })")
      .find(R"(/cluster/prefetch: expected true, false or "auto", found "yes")")
    != std::string::npos);
  BOOST_TEST(
    with(R"({ "heartbeat_interval_ms": 500, "connection_timeout_ms": 100 })")
      .find("/cluster/connection_timeout_ms: must exceed")
    != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cluster_tls_names_the_files_of_each_node) {
  auto text = replace_first(synthetic_config, R"("training")", R"("cluster": {
    "nodes": [ { "name": "a", "port": 7000, "shards": 1 },
               { "name": "b", "port": 7001, "workers": 1,
                 "certificate": "b.pem", "key": "b.key" } ],
    "tls": { "ca": "ca.pem", "certificate": "node.pem", "key": "node.key",
             "handshake_timeout_ms": 2000 } },
  "training")");
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  auto& c = cfg->cluster;
  BOOST_TEST(c.tls.enabled());
  BOOST_TEST(c.tls.ca == "ca.pem");
  BOOST_TEST(c.tls.certificate == "node.pem");
  BOOST_TEST(c.tls.handshake_timeout_ms == 2000);
  BOOST_TEST(c.node("b")->certificate == "b.pem");
  BOOST_TEST(c.node("a")->certificate.empty());
}

BOOST_AUTO_TEST_CASE(bad_cluster_tls_names_the_path) {
  auto with = [](const std::string& nodes, const std::string& tls) {
    return error_of(replace_first(synthetic_config, R"("training")",
                                  "\"cluster\": { \"nodes\": " + nodes
                                    + (tls.empty() ? "" : ", \"tls\": " + tls)
                                    + " }, \"training\""));
  };
  auto nodes = std::string{R"([ { "name": "a", "port": 7000, "shards": 1 },
                                { "name": "b", "port": 7001, "workers": 1 } ])"};
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  auto e = with(nodes, R"({ "certificate": "n.pem", "key": "n.key" })");
  BOOST_TEST(has(e, "/cluster/tls/ca: missing required key"), e);
  e = with(nodes, R"({ "ca": "ca.pem" })");
  BOOST_TEST(has(e, "/cluster/tls/certificate: missing required key"), e);
  e = with(nodes, R"({ "ca": "", "certificate": "n.pem", "key": "n.key" })");
  BOOST_TEST(has(e, "/cluster/tls/ca: expected the path of a PEM file"), e);
  e = with(nodes, R"({ "ca": "ca.pem", "certificate": "n.pem", "key": "n.key",
                       "handshake_timeout_ms": 5 })");
  BOOST_TEST(has(e, "/cluster/tls/handshake_timeout_ms"), e);
  e = with(nodes, R"({ "ca": "ca.pem", "certificate": "n.pem", "key": "n.key",
                       "cipher": "x" })");
  BOOST_TEST(has(e, "/cluster/tls/cipher: unknown key"), e);
  e = with(
    R"([ { "name": "a", "port": 7000, "shards": 1, "certificate": "a.pem" },
                { "name": "b", "port": 7001, "workers": 1 } ])",
    R"({ "ca": "ca.pem", "certificate": "n.pem", "key": "n.key" })");
  BOOST_TEST(has(e, "/cluster/nodes/0/key: a node's own certificate needs its "
                    "key"),
             e);
  e = with(R"([ { "name": "a", "port": 7000, "shards": 1,
                  "certificate": "a.pem", "key": "a.key" },
                { "name": "b", "port": 7001, "workers": 1 } ])",
           "");
  BOOST_TEST(has(e, "/cluster/nodes/0/certificate: needs /cluster/tls"), e);
  // Every node with its own certificate: the cluster-wide one is optional.
  auto ok = parse_run_config(replace_first(synthetic_config, R"("training")",
                                           R"("cluster": { "nodes": [
      { "name": "a", "port": 7000, "shards": 1,
        "certificate": "a.pem", "key": "a.key" },
      { "name": "b", "port": 7001, "workers": 1,
        "certificate": "b.pem", "key": "b.key" } ],
      "tls": { "ca": "ca.pem" } }, "training")"),
                             "cfg.json");
  BOOST_TEST(static_cast<bool>(ok), troupe::test::why(ok));
}

BOOST_AUTO_TEST_CASE(shard_replicas_need_two_nodes_that_hold_shards) {
  auto with = [](const std::string& cluster) {
    return parse_run_config(replace_first(synthetic_config, R"("training")",
                                          "\"cluster\": " + cluster
                                            + ", \"training\""),
                            "cfg.json");
  };
  auto two = with(R"({ "shard_replicas": 1, "nodes": [
      { "name": "a", "port": 7000, "shards": 1 },
      { "name": "b", "port": 7001, "shards": 1, "workers": 1 } ] })");
  BOOST_REQUIRE_MESSAGE(two, troupe::test::why(two));
  BOOST_TEST(two->cluster.shard_replicas == 1);
  BOOST_TEST(with("{}")->cluster.shard_replicas == 0);
  auto one = with(R"({ "shard_replicas": 1, "nodes": [
      { "name": "a", "port": 7000, "shards": 2 },
      { "name": "b", "port": 7001, "workers": 1 } ] })");
  BOOST_REQUIRE(!one);
  auto e = troupe::test::why(one);
  BOOST_TEST(e.find("/cluster/shard_replicas: needs at least two nodes that "
                    "hold shards")
               != std::string::npos,
             e);
  e = troupe::test::why(with(R"({ "shard_replicas": 2 })"));
  BOOST_TEST(e.find("/cluster/shard_replicas") != std::string::npos, e);
}

BOOST_AUTO_TEST_CASE(a_node_may_name_its_workers_device) {
  auto text = replace_first(synthetic_config, R"("training")", R"("cluster": {
    "nodes": [ { "name": "a", "port": 7000, "shards": 1 },
               { "name": "b", "port": 7001, "workers": 1, "device": "gpu" } ] },
  "training")");
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(!cfg->cluster.node("a")->device.has_value());
  BOOST_TEST(cfg->cluster.node("b")->device->to_string() == "gpu:0");
}

BOOST_AUTO_TEST_SUITE_END()
