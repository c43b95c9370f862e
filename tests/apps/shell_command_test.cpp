// troupe-shell's command language and its rendering, without a cluster:
// what a typed line becomes, which lines are refused and why, and the JSON
// shape that scripts read.
#include "apps/shell/shell_command.hpp"

#include <boost/test/unit_test.hpp>

#include <ctime>

// GCC 12 reports a false -Warray-bounds inside nlohmann::json (at -O2).
#pragma GCC diagnostic ignored "-Warray-bounds"
#include <nlohmann/json.hpp>

#include "apps/shell/shell_render.hpp"
#include "runtime/base/errc.hpp"

using namespace troupe;
using verb = shell_command::verb;

namespace {

shell_command parsed(const std::string& line) {
  auto c = parse_shell_command(line);
  if (!c) // the message is built first: only when there is an error
    BOOST_FAIL(line + ": " + describe(c.error()));
  return *c;
}

std::string refusal(const std::string& line) {
  auto c = parse_shell_command(line);
  BOOST_REQUIRE_MESSAGE(!c, line + " was accepted");
  BOOST_TEST((c.error() == errc::invalid_argument));
  return describe(c.error());
}

cluster_view small_view() {
  cluster_view v;
  v.run.name = "r";
  v.run.run_id = "0123456789abcdef";
  v.run.own_node = "chief";
  v.run.steps = 40;
  v.run.taken_over = true;
  v.run.taken_from_step = 30;
  v.run.taken_lost_steps = 0;
  shard_view s;
  s.id = 0;
  s.node = "ps0";
  s.state = "running";
  s.begin = 0;
  s.end = 100;
  s.answered = true;
  s.version = 41;
  v.shards.push_back(s);
  worker_view w;
  w.id = 3;
  w.node = "w0";
  w.state = "running";
  v.workers.push_back(w);
  return v;
}

} // namespace

BOOST_AUTO_TEST_SUITE(shell_command)

BOOST_AUTO_TEST_CASE(lines_become_typed_commands) {
  BOOST_TEST((parsed("status").what == verb::status));
  BOOST_TEST((parsed("  nodes ").what == verb::nodes));
  auto i = parsed("inspect worker:3");
  BOOST_TEST((i.what == verb::inspect));
  BOOST_TEST((i.target.role == actor_role::worker));
  BOOST_TEST(i.target.index == 3);
  BOOST_TEST(parsed("inspect shard 2").target.index == 2); // space for colon
  BOOST_TEST((parsed("inspect feeder").target.role == actor_role::feeder));
  auto a = parsed("add-worker 3 w1");
  BOOST_TEST((a.what == verb::add_worker));
  BOOST_TEST(a.count == 3);
  BOOST_TEST(a.node == "w1");
  auto d = parsed("add-worker");
  BOOST_TEST(d.count == 1);
  BOOST_TEST(d.node.empty()); // the least loaded node
  auto t = parsed("set lr 0.0005");
  BOOST_TEST((t.what == verb::tune));
  BOOST_TEST((t.key == tune_key::lr));
  BOOST_TEST(t.value == 0.0005);
  BOOST_TEST((parsed("kill shard:1").target.role == actor_role::shard));
  auto g = parsed("add-shard ps2");
  BOOST_TEST((g.what == verb::add_shard));
  BOOST_TEST(g.node == "ps2");
  auto dr = parsed("drain shard:1");
  BOOST_TEST((dr.what == verb::drain));
  BOOST_TEST(dr.target.index == 1);
  BOOST_TEST(!parsed("status").all);
  BOOST_TEST(parsed("status all").all);
  BOOST_TEST((parsed("nodes all").what == verb::nodes));
}

BOOST_AUTO_TEST_CASE(bad_lines_are_refused_with_the_usage) {
  BOOST_TEST(refusal("") == "empty command; try help");
  // help names every word the shell takes, quit included.
  const std::string help = "\n" + std::string{shell_help} + "\n";
  auto names = [&](const std::string& word) {
    for (auto* before : {"\n", "| "})
      for (auto* after : {" ", "\n"})
        if (help.find(before + word + after) != std::string::npos)
          return true;
    return false;
  };
  for (auto& word : shell_command_words())
    BOOST_TEST(names(word), word + " is missing from help");
  BOOST_TEST(refusal("frobnicate")
             == "unknown command \"frobnicate\"; try help");
  BOOST_TEST(refusal("set lr -1")
             == "set lr: expected a number > 0, got \"-1\"");
  BOOST_TEST(refusal("set lr nan")
             == "set lr: expected a number > 0, got \"nan\"");
  BOOST_TEST(refusal("set momentum 0.5") == "usage: set lr VALUE");
  BOOST_TEST(refusal("add-worker 0")
             == "add-worker: N must be 1..1024, got \"0\"");
  BOOST_TEST(refusal("add-worker 2x")
             == "add-worker: N must be 1..1024, got \"2x\"");
  BOOST_TEST(refusal("kill feeder") == "usage: kill worker:N | shard:N");
  BOOST_TEST(refusal("add-shard") == "usage: add-shard NODE");
  BOOST_TEST(refusal("add-shard ps1 ps2") == "usage: add-shard NODE");
  BOOST_TEST(refusal("drain worker:1") == "usage: drain shard:N");
  BOOST_TEST(refusal("drain shard:") == "usage: drain shard:N");
  BOOST_TEST(refusal("kill worker:") == "usage: kill worker:N | shard:N");
  BOOST_TEST(refusal("inspect")
             == "usage: inspect ACTOR (chief, feeder, shard:N, worker:N)");
  BOOST_TEST(refusal("inspect worker:-1")
             == "usage: inspect ACTOR (chief, feeder, shard:N, worker:N)");
  BOOST_TEST(
    refusal("inspect gremlin:1")
    == "unknown actor \"gremlin:1\" (chief, feeder, shard:N, worker:N)");
  BOOST_TEST(refusal("status now") == "usage: status [all]");
  BOOST_TEST(refusal("workers all 2") == "usage: workers [all]");
  BOOST_TEST(refusal("pause now") == "pause takes no arguments, got \"now\"");
  BOOST_TEST(refusal("status " + std::string(5000, 'x'))
             == "a command line of 5007 characters (at most 4096)");
}

BOOST_AUTO_TEST_CASE(the_json_keeps_the_shape_scripts_read) {
  auto v = small_view();
  auto text = render_view(parsed("status"), v, true);
  BOOST_REQUIRE(text);
  auto j = nlohmann::json::parse(*text);
  BOOST_TEST(j["run"]["run_id"] == "0123456789abcdef");
  BOOST_TEST(j["run"]["taken_over"]["from_step"] == 30);
  BOOST_TEST(j["run"]["taken_over"]["lost_steps"] == 0);
  // No evaluation yet: null, in JSON and "-" in the table, never -1.
  BOOST_TEST(j["run"]["test_accuracy"].is_null());
  BOOST_TEST(render_view(parsed("status"), v, false)->find("test accuracy -,")
             != std::string::npos);
  BOOST_TEST(j["run"]["loss"].is_null());
  BOOST_TEST(j["run"]["eta_seconds"].is_null());
  v.run.test_accuracy = 0.5;
  v.run.steps = 50;
  v.run.total_steps = 200;
  v.run.eta_seconds = 125;
  v.run.learning_rate = 0.002;
  v.run.loss = 0.25;
  auto evaluated = nlohmann::json::parse(
    *render_view(parsed("status"), v, true));
  BOOST_TEST(evaluated["run"]["test_accuracy"] == 0.5);
  BOOST_TEST(evaluated["run"]["percent_done"] == 25.0);
  BOOST_TEST(evaluated["run"]["eta_seconds"] == 125.0);
  auto line = *render_view(parsed("status"), v, false);
  BOOST_TEST(line.find("step 50 of 200 (25%), epoch ") != std::string::npos,
             line);
  BOOST_TEST(line.find("ETA 2m05s") != std::string::npos, line);
  BOOST_TEST(line.find("lr 0.002, loss 0.25, test accuracy 0.5")
               != std::string::npos,
             line);
  v.run.test_accuracy = -1;
  BOOST_TEST(j["actors"][0]["id"] == "chief");
  BOOST_TEST(j["actors"][1]["id"] == "feeder");
  BOOST_TEST(j["actors"][2]["id"] == "shard:0");
  BOOST_TEST(j["actors"][2]["version"] == 41);
  BOOST_TEST(j["actors"][3]["id"] == "worker:3");
  auto shards = nlohmann::json::parse(*render_view(parsed("shards"), v, true));
  BOOST_TEST(shards[0]["size"] == 100);
  // For a person: a table with a row per actor.
  auto table = render_view(parsed("status"), v, false);
  BOOST_TEST(table->find("worker:3  worker  w0") != std::string::npos, *table);
}

// nodes: memory in binary units for a person, in bytes for scripts.
BOOST_AUTO_TEST_CASE(nodes_show_memory_a_person_reads) {
  auto v = small_view();
  node_view a, b;
  a.name = "chief";
  a.up = true;
  a.resident_bytes = 43'305'779; // 41.3 MiB
  a.heap_bytes = 3'250'586;      // 3.1 MiB
  a.started_unix = static_cast<double>(std::time(nullptr)) - 3725;
  a.heard_age = 0;
  b.name = "w0"; // did not answer
  b.heard_age = 12.4;
  v.nodes = {a, b};
  auto table = *render_view(parsed("nodes"), v, false);
  BOOST_TEST(table.find("RSS") != std::string::npos, table);
  BOOST_TEST(table.find("41.3 MiB") != std::string::npos, table);
  BOOST_TEST(table.find("HEAP") != std::string::npos, table);
  BOOST_TEST(table.find("3.1 MiB") != std::string::npos, table);
  BOOST_TEST(table.find("43305779") == std::string::npos, table);
  // How long each has run and since the chief heard from it: the chief's
  // process up 1h02m (3725 s), heard now; w0 silent for 12 s.
  BOOST_TEST(table.find("UP") != std::string::npos, table);
  BOOST_TEST(table.find("HEARD") != std::string::npos, table);
  BOOST_TEST(table.find("1h02m") != std::string::npos, table);
  BOOST_TEST(table.find("12s") != std::string::npos, table);
  auto rows = nlohmann::json::parse(*render_view(parsed("nodes"), v, true));
  BOOST_TEST(rows[0]["heard_seconds_ago"] == 0.0);
  BOOST_TEST(rows[1]["heard_seconds_ago"] == 12.4);
  BOOST_TEST(rows[1]["process_started"].is_null());
  BOOST_TEST(rows[0]["resident_bytes"] == 43305779);
  BOOST_TEST(rows[1]["resident_bytes"].is_null());
  BOOST_TEST(rows[0]["heap_bytes"] == 3250586);
  BOOST_TEST(rows[1]["heap_bytes"].is_null());
}

// Embedding tables: each table's rows and traffic on each shard.
BOOST_AUTO_TEST_CASE(shards_show_each_tables_rows) {
  auto v = small_view();
  auto& s = v.shards[0];
  s.rows = 1600;
  s.tables = {{"item", 1500, 3 * 1024 * 1024, 7000, 6000},
              {"user", 100, 6400, 300, 200, 900, 40, 800}};
  auto table = *render_view(parsed("shards"), v, false);
  BOOST_TEST(table.find("shard:0 table item: 1500 rows in 3.0 MiB, 7000 "
                        "pulled, 6000 pushed\n")
               != std::string::npos,
             table);
  // A bounded table's line says what it did not admit and what it evicted.
  BOOST_TEST(table.find("shard:0 table user: 100 rows in 6.2 KiB, 300 "
                        "pulled, 200 pushed, 40 not admitted, 800 evicted\n")
               != std::string::npos,
             table);
  BOOST_TEST(table.find("shard:0 table user: 100 rows") != std::string::npos,
             table);
  auto one = nlohmann::json::parse(
    *render_view(parsed("inspect shard:0"), v, true));
  BOOST_TEST(one["tables"][1]["name"] == "user");
  BOOST_TEST(one["tables"][1]["rows_pushed"] == 200);
  BOOST_TEST(one["tables"][1]["rows_made"] == 900);
  BOOST_TEST(one["tables"][1]["rows_rejected"] == 40);
  BOOST_TEST(one["tables"][1]["rows_evicted"] == 800);
  auto people = *render_view(parsed("inspect shard:0"), v, false);
  BOOST_TEST(people.find("name: item") != std::string::npos, people);
  // Admission by count: how full the filter is.
  s.tables[1].filter_used = 250;
  s.tables[1].filter_counters = 1000;
  table = *render_view(parsed("shards"), v, false);
  BOOST_TEST(table.find("40 not admitted, 800 evicted, admission filter "
                        "25.0% full\n")
               != std::string::npos,
             table);
}

// training.export: status names the last export and how long ago it was.
BOOST_AUTO_TEST_CASE(status_shows_the_last_export) {
  auto v = small_view();
  auto text = *render_view(parsed("status"), v, false);
  BOOST_TEST(text.find("last export") == std::string::npos, text);
  BOOST_TEST(nlohmann::json::parse(
               *render_view(parsed("status"), v, true))["run"]["last_export"]
               .is_null());
  v.run.export_sequence = 7;
  v.run.export_kind = "delta";
  v.run.export_step = 1200;
  v.run.export_age = 95;
  v.run.export_rows = 5000;
  v.run.export_evicted = 12;
  v.run.export_bytes = 3 * 1024 * 1024;
  text = *render_view(parsed("status"), v, false);
  BOOST_TEST(text.find("last export 7 (delta) at step 1200, 1m35s ago: 5000 "
                       "rows, 12 evicted keys, 3.0 MiB\n")
               != std::string::npos,
             text);
  auto j = nlohmann::json::parse(*render_view(parsed("status"), v, true));
  BOOST_TEST(j["run"]["last_export"]["sequence"] == 7);
  BOOST_TEST(j["run"]["last_export"]["age_seconds"] == 95.0);
}

// data.follow: status names the parts and the progressive validation.
BOOST_AUTO_TEST_CASE(status_shows_a_followed_folder) {
  auto v = small_view();
  auto text = *render_view(parsed("status"), v, false);
  BOOST_TEST(text.find("stream:") == std::string::npos, text);
  BOOST_TEST(nlohmann::json::parse(
               *render_view(parsed("status"), v, true))["run"]["stream"]
               .is_null());
  v.run.stream_parts = 12;
  v.run.stream_waiting = 2;
  v.run.progressive_samples = 300000;
  v.run.progressive_loss = 0.5;
  v.run.parts_loss = 0.625;
  v.run.last_part = "train-011.tsv";
  v.run.last_part_loss = 0.25;
  v.run.last_part_auc = 0.75;
  text = *render_view(parsed("status"), v, false);
  BOOST_TEST(text.find("stream: 12 parts taken, 2 waiting; progressive "
                       "log-loss 0.5 over 300000 samples, each before its "
                       "step; parts scored before training: log-loss 0.625, "
                       "last part train-011.tsv: log-loss 0.25, AUC 0.75\n")
               != std::string::npos,
             text);
  auto j = nlohmann::json::parse(*render_view(parsed("status"), v, true));
  BOOST_TEST(j["run"]["stream"]["parts"] == 12);
  BOOST_TEST(j["run"]["stream"]["progressive_log_loss"] == 0.5);
}

BOOST_AUTO_TEST_CASE(a_long_list_is_summarised_for_a_person_not_for_scripts) {
  // 100 workers, 3 of them down: the table says how many of each role
  // are in each state, lists the 3 first and then the chief, the feeder
  // and the first running ones, 40 rows in all; `all` and --json list
  // every one.
  auto v = small_view();
  v.workers.clear();
  for (int32_t i = 0; i < 100; ++i) {
    worker_view w;
    w.id = i;
    w.node = "w" + std::to_string(i);
    w.state = i == 50 || i == 70 || i == 90 ? "down" : "running";
    v.workers.push_back(w);
  }
  auto rows = [](const std::string& text) {
    size_t n = 0;
    for (auto c : text)
      n += c == '\n';
    return n;
  };
  for (auto* command : {"status", "workers"}) {
    auto text = *render_view(parsed(command), v, false);
    BOOST_TEST(text.find("3 down, 97 running); listed: 40, the 3 not running "
                         "or up first")
                 != std::string::npos,
               text);
    BOOST_TEST(text.find("(`" + std::string{command} + " all` lists every one)")
                 != std::string::npos,
               text);
    auto down_at = text.find(" w90 ");
    BOOST_TEST((down_at != std::string::npos && down_at < text.find(" w0 ")),
               text);
    BOOST_TEST(text.find(" w60 ") == std::string::npos, text);
    auto all = *render_view(parsed(std::string{command} + " all"), v, false);
    BOOST_TEST(all.find(" w60 ") != std::string::npos, all);
    BOOST_TEST(all.find("listed:") == std::string::npos, all);
  }
  auto status = *render_view(parsed("status"), v, false);
  // The run line, the summary, the heading and 40 rows.
  BOOST_TEST(rows(status) == 43u, status);
  BOOST_TEST(status.find("103 actors (chief 1 training; feeder 1 leasing; "
                         "shard 1 running; worker 3 down, 97 running)")
               != std::string::npos,
             status);
  BOOST_TEST(status.find("\nchief ") != std::string::npos, status);
  auto j = nlohmann::json::parse(*render_view(parsed("status"), v, true));
  BOOST_TEST(j["actors"].size() == 103u);
  // A short list is listed whole, without the line.
  auto few = *render_view(parsed("status"), small_view(), false);
  BOOST_TEST(few.find("listed:") == std::string::npos, few);
}

BOOST_AUTO_TEST_CASE(inspecting_an_actor_the_cluster_lacks_is_an_error) {
  auto v = small_view();
  auto none = render_view(parsed("inspect shard:7"), v, true);
  BOOST_REQUIRE(!none);
  BOOST_TEST(describe(none.error()) == "no shard 7 (shards: 0-0)");
  auto gone = render_view(parsed("inspect worker:0"), v, true);
  BOOST_TEST(describe(gone.error()) == "no worker 0");
  auto feeder = render_view(parsed("inspect feeder"), v, true);
  BOOST_TEST(describe(feeder.error()) == "the feeder did not answer");
  auto one = render_view(parsed("inspect shard:0"), v, true);
  BOOST_REQUIRE(one);
  BOOST_TEST(nlohmann::json::parse(*one)["range"][1] == 100);
}

BOOST_AUTO_TEST_SUITE_END()
