// The chief's Prometheus text (apps/metrics/prometheus_text): what is not known
// yet is left out, never a sentinel; every series carries the run's name
// and id; label values are escaped.
#include "apps/metrics/prometheus_text.hpp"

#include <cstdlib>
#include <cstring>
#include <ctime>

#include <boost/test/unit_test.hpp>

using namespace troupe;

BOOST_AUTO_TEST_SUITE(prometheus_text)

BOOST_AUTO_TEST_CASE(unknown_values_are_left_out) {
  cluster_view v;
  v.run.name = "r";
  v.run.steps = 7;
  v.run.run_id = "abc";
  v.run.samples = 896;
  auto text = troupe::prometheus_text(v, process_usage{});
  BOOST_TEST(text.find("\ntroupe_steps_total{run=\"r\",run_id=\"abc\"} 7\n")
               != std::string::npos,
             text);
  BOOST_TEST(text.find("\n# TYPE troupe_samples_total counter\n"
                       "troupe_samples_total{run=\"r\",run_id=\"abc\"} 896\n")
               != std::string::npos,
             text);
  // Every sample line, whatever its family, names the run.
  size_t lines = 0;
  for (size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) {
    if (text[at] == '#')
      continue;
    ++lines;
    const std::string labels = "{run=\"r\",run_id=\"abc\"";
    BOOST_TEST(text.compare(text.find('{', at), labels.size(), labels) == 0,
               text.substr(at, text.find('\n', at) - at));
  }
  BOOST_TEST(lines > 10u);
  // One word for samples: no family says "examples".
  BOOST_TEST(text.find("examples") == std::string::npos, text);
  // No evaluation, loss or rate yet: those families are absent.
  BOOST_TEST(text.find("troupe_test_accuracy") == std::string::npos, text);
  BOOST_TEST(text.find("troupe_loss") == std::string::npos, text);
  BOOST_TEST(text.find("troupe_eta_seconds") == std::string::npos, text);
  BOOST_TEST(text.find("-1") == std::string::npos, text);
  v.run.test_accuracy = 0.875;
  v.run.loss = 0.25;
  text = troupe::prometheus_text(v, process_usage{});
  BOOST_TEST(text.find("\ntroupe_test_accuracy{run=\"r\",run_id=\"abc\"} "
                       "0.875\n")
               != std::string::npos,
             text);
  BOOST_TEST(text.find("\ntroupe_loss{run=\"r\",run_id=\"abc\"} 0.25\n")
               != std::string::npos,
             text);
}

BOOST_AUTO_TEST_CASE(a_node_that_did_not_answer_has_no_usage_sample) {
  cluster_view v;
  node_view up, silent;
  up.name = "ps0";
  up.resident_bytes = 123456789;
  up.cpu_seconds = 2.5;
  up.heap_bytes = 4096;
  up.started_unix = 1796000000.5;
  up.heard_age = 0.25;
  silent.name = "w0";
  v.nodes = {up, silent};
  auto text = troupe::prometheus_text(v, process_usage{});
  BOOST_TEST(
    text.find(
      "\ntroupe_node_resident_memory_bytes{run=\"\",run_id=\"\",node=\"ps0\"} "
      "123456789\n")
      != std::string::npos,
    text);
  BOOST_TEST(text.find("\ntroupe_node_cpu_seconds_total{run=\"\",run_id=\"\","
                       "node=\"ps0\"} 2.5\n")
               != std::string::npos,
             text);
  BOOST_TEST(text.find("\ntroupe_node_heap_bytes{run=\"\",run_id=\"\","
                       "node=\"ps0\"} 4096\n")
               != std::string::npos,
             text);
  BOOST_TEST(text.find("\ntroupe_node_start_time_seconds{run=\"\",run_id="
                       "\"\",node=\"ps0\"} 1796000000.5\n")
               != std::string::npos,
             text);
  BOOST_TEST(text.find("\ntroupe_node_heard_age_seconds{run=\"\",run_id="
                       "\"\",node=\"ps0\"} 0.25\n")
               != std::string::npos,
             text);
  BOOST_TEST(text.find("node=\"w0\"} ") == std::string::npos, text);
  BOOST_TEST(text.find("-1") == std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(table_rows_appear_only_for_a_model_with_tables) {
  cluster_view v;
  shard_view s;
  s.id = 1;
  s.node = "ps0";
  s.answered = true;
  v.shards = {s};
  auto text = troupe::prometheus_text(v, process_usage{});
  BOOST_TEST(text.find("troupe_shard_rows") == std::string::npos, text);
  // Each table its own series: a click model's one ("embedding"), an
  // external model's by name.
  v.shards[0].rows = 1600;
  v.shards[0].tables = {{"item", 1500, 98304, 7000, 6000},
                        {"user", 100, 6400, 300, 200, 900, 40, 800}};
  text = troupe::prometheus_text(v, process_usage{});
  const std::string at = "{run=\"\",run_id=\"\",shard=\"1\",node=\"ps0\",";
  for (auto& line :
       {"troupe_shard_rows" + at + "table=\"item\"} 1500\n",
        "troupe_shard_rows" + at + "table=\"user\"} 100\n",
        "troupe_shard_row_memory_bytes" + at + "table=\"item\"} 98304\n",
        "troupe_shard_rows_pulled_total" + at + "table=\"item\"} 7000\n",
        "troupe_shard_rows_pushed_total" + at + "table=\"item\"} 6000\n",
        "troupe_shard_rows_pushed_total" + at + "table=\"user\"} 200\n",
        "troupe_shard_rows_made_total" + at + "table=\"user\"} 900\n",
        "troupe_shard_rows_rejected_total" + at + "table=\"user\"} 40\n",
        "troupe_shard_rows_evicted_total" + at + "table=\"user\"} 800\n",
        std::string{"# TYPE troupe_shard_rows gauge\n"}})
    BOOST_TEST(text.find(line) != std::string::npos, line << " in " << text);
  BOOST_TEST(text.find("troupe_shard_admission_counters") == std::string::npos,
             text);
  v.shards[0].tables[1].filter_used = 250;
  v.shards[0].tables[1].filter_counters = 1000;
  text = troupe::prometheus_text(v, process_usage{});
  for (auto& line :
       {"troupe_shard_admission_counters_used" + at + "table=\"user\"} 250\n",
        "troupe_shard_admission_counters" + at + "table=\"user\"} 1000\n"})
    BOOST_TEST(text.find(line) != std::string::npos, line << " in " << text);
}

BOOST_AUTO_TEST_CASE(the_last_export_appears_once_there_is_one) {
  cluster_view v;
  auto text = troupe::prometheus_text(v, process_usage{});
  BOOST_TEST(text.find("troupe_export") == std::string::npos, text);
  v.run.export_sequence = 3;
  v.run.export_kind = "delta";
  v.run.export_step = 900;
  v.run.export_age = 12.5;
  v.run.export_rows = 40;
  text = troupe::prometheus_text(v, process_usage{});
  for (auto* line :
       {"troupe_export_sequence{run=\"\",run_id=\"\",kind=\"delta\"} 3\n",
        "troupe_export_step{run=\"\",run_id=\"\"} 900\n",
        "troupe_export_age_seconds{run=\"\",run_id=\"\"} 12.5\n",
        "troupe_export_rows{run=\"\",run_id=\"\"} 40\n"})
    BOOST_TEST(text.find(line) != std::string::npos, line << " in " << text);
}

BOOST_AUTO_TEST_CASE(a_followed_folder_shows_its_parts_and_progressive_score) {
  cluster_view v;
  auto text = troupe::prometheus_text(v, process_usage{});
  BOOST_TEST(text.find("troupe_stream") == std::string::npos, text);
  BOOST_TEST(text.find("troupe_progressive") == std::string::npos, text);
  v.run.stream_parts = 12;
  v.run.stream_waiting = 2;
  v.run.progressive_samples = 300000;
  v.run.progressive_loss = 0.4625;
  v.run.parts_loss = 0.5;
  v.run.last_part = "train-011.tsv";
  v.run.last_part_loss = 0.45;
  v.run.last_part_auc = 0.75;
  text = troupe::prometheus_text(v, process_usage{});
  for (auto* line :
       {"troupe_stream_parts{run=\"\",run_id=\"\"} 12\n",
        "troupe_stream_parts_waiting{run=\"\",run_id=\"\"} 2\n",
        "troupe_progressive_samples{run=\"\",run_id=\"\"} 300000\n",
        "troupe_progressive_log_loss{run=\"\",run_id=\"\"} 0.4625\n",
        "troupe_parts_log_loss{run=\"\",run_id=\"\"} 0.5\n",
        "troupe_last_part_auc{run=\"\",run_id=\"\",part=\"train-011.tsv\"} "
        "0.75\n"})
    BOOST_TEST(text.find(line) != std::string::npos, line << " in " << text);
}

BOOST_AUTO_TEST_CASE(label_values_are_escaped) {
  BOOST_TEST(prometheus_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  cluster_view v;
  v.run.name = "my \"run\"";
  auto text = troupe::prometheus_text(v, process_usage{});
  BOOST_TEST(text.find(R"(run="my \"run\"")") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(this_process_has_memory_and_cpu) {
  auto u = own_process_usage();
  BOOST_TEST(u.resident_bytes > 1000000);
  BOOST_TEST(u.cpu_seconds > 0);
  // This test program started within the last minutes, by the wall clock
  // (its start read from /proc, not from when the library was loaded).
  const double now = static_cast<double>(std::time(nullptr));
  BOOST_TEST(u.started_unix <= now + 1);
  BOOST_TEST(u.started_unix > now - 600);
}

BOOST_AUTO_TEST_CASE(the_heap_in_use_follows_what_is_allocated_and_freed) {
  auto before = own_process_usage().heap_bytes;
  BOOST_TEST(before > 0);
  constexpr size_t size = 64 << 20;
  auto* block = static_cast<char*>(std::malloc(size));
  BOOST_REQUIRE(block != nullptr);
  std::memset(block, 1, size);
  auto held = own_process_usage().heap_bytes;
  BOOST_TEST(held - before >= static_cast<int64_t>(size));
  std::free(block);
  auto after = own_process_usage().heap_bytes;
  BOOST_TEST(held - after >= static_cast<int64_t>(size));
}

BOOST_AUTO_TEST_SUITE_END()
