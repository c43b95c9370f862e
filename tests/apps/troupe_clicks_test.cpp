// troupe-clicks driven as a user drives it: the logs it writes read back
// with the click-log reader, the planted model's figures it prints, a
// drifting stream in parts, and its errors.
#include <boost/test/unit_test.hpp>

#include <set>

#include "app_runner.hpp"
#include "runtime/data/click_data.hpp"

using namespace troupe::test;

namespace {
bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
} // namespace

BOOST_AUTO_TEST_SUITE(troupe_clicks)

BOOST_AUTO_TEST_CASE(writes_logs_the_reader_takes_and_prints_the_floor) {
  temp_dir tmp;
  auto o = run_app(tmp, "troupe-clicks",
                   "--out " + tmp.file("logs")
                     + " --train 2000 --test 500 "
                       "--numeric 1 --categorical 3 --values 100 --seed 4");
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("1 numeric and 3 categorical fields, 100 values "
                        "each")
               != std::string::npos,
             o.out);
  auto at = o.out.find("planted model: test log-loss ");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, o.out);
  double floor = std::stod(o.out.substr(at + 30));
  BOOST_TEST(floor > 0.1);
  BOOST_TEST(floor < 0.7);
  const troupe::click_schema schema{1, 3, 1 << 20};
  auto train = troupe::load_click_log(tmp.file("logs/train.tsv"), schema);
  auto test = troupe::load_click_log(tmp.file("logs/test.tsv"), schema);
  BOOST_REQUIRE(train);
  BOOST_REQUIRE(test);
  BOOST_TEST(train->count == 2000);
  BOOST_TEST(test->count == 500);
  // The planted floor is the log-loss of the model's own probabilities.
  BOOST_TEST(troupe::log_loss(std::vector<double>(500, 0.5), test->labels)
             > floor);
}

BOOST_AUTO_TEST_CASE(a_drifting_stream_in_parts_moves_on_to_new_values) {
  temp_dir tmp;
  const troupe::click_schema schema{1, 3, 1 << 20};
  // Field 1's distinct ids in a part, and how many of them the first
  // part also has.
  auto ids_of = [&](const std::string& path) {
    auto logs = troupe::load_click_log(path, schema);
    BOOST_REQUIRE_MESSAGE(logs, path);
    std::set<uint64_t> out;
    for (int64_t i = 0; i < logs->count; ++i) {
      auto [from, to] = logs->field(i, 1);
      out.insert(from, to);
    }
    return std::make_pair(out, logs->count);
  };
  auto shared = [](const std::set<uint64_t>& a, const std::set<uint64_t>& b) {
    size_t n = 0;
    for (auto id : b)
      n += a.count(id);
    return static_cast<double>(n) / static_cast<double>(b.size());
  };
  double overlap[2];
  for (int drifting : {0, 1}) {
    auto dir = tmp.file(drifting ? "drift" : "still");
    auto o = run_app(tmp, "troupe-clicks",
                     "--out " + dir
                       + " --train 4000 --test 500 --numeric 1 "
                         "--categorical 3 --values 100 --seed 4 --parts 4"
                       + (drifting ? " --drift 100" : ""));
    BOOST_REQUIRE_MESSAGE(o.code == 0, o.err);
    BOOST_TEST(has(o.out, dir + "/train-*.tsv (4000 lines)"), o.out);
    BOOST_TEST(has(o.out, "drifting: 100 new values per field every 1000 "
                          "lines, 400 in all")
                 == (drifting == 1),
               o.out);
    auto [first, lines] = ids_of(dir + "/train-000.tsv");
    BOOST_TEST(lines == 1000);
    auto [last, last_lines] = ids_of(dir + "/train-003.tsv");
    BOOST_TEST(last_lines == 1000);
    overlap[drifting] = shared(first, last);
  }
  // A still stream's last part draws from the same values as its first;
  // a drifting one's has moved on to others.
  BOOST_TEST_MESSAGE("ids of the last part in the first: still "
                     << overlap[0] << ", drifting " << overlap[1]);
  BOOST_TEST(overlap[0] > 0.8);
  BOOST_TEST(overlap[1] < 0.3);
  auto o = run_app(tmp, "troupe-clicks",
                   "--out " + tmp.file("few") + " --train 3 --parts 4");
  BOOST_TEST(o.code != 0);
  BOOST_TEST(has(o.err, "--parts 4 is more than the training lines (3)"),
             o.err);
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_one_line_and_exit_2) {
  temp_dir tmp;
  auto o = run_app(tmp, "troupe-clicks", "--train 10");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("troupe-clicks: error: --out is required") == 0u,
             o.err);
  o = run_app(tmp, "troupe-clicks",
              "--out " + tmp.file("x") + " --categorical 0");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("--categorical") != std::string::npos, o.err);
  troupe::test::write_file(tmp.file("file"), "not a folder");
  o = run_app(tmp, "troupe-clicks", "--out " + tmp.file("file/logs"));
  BOOST_TEST(o.code == 1);
  BOOST_TEST(o.err
               == "troupe-clicks: error: " + tmp.file("file/logs")
                    + ": cannot create the folder\n",
             o.err);
}

// troupe-predict --export: what it refuses, naming what is wrong (a
// run's exports scored: replicas.a_tables_exports_lose_no_delta_...).
BOOST_AUTO_TEST_CASE(predicting_from_exports_refuses_what_it_cannot_score) {
  temp_dir tmp;
  auto o = run_app(tmp, "troupe-predict", "--input x.tsv --output p.csv");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("--checkpoint or --export is required")
               != std::string::npos,
             o.err);
  o = run_app(tmp, "troupe-predict",
              "--checkpoint c.safetensors --export " + tmp.path()
                + " --input x.tsv --output p.csv");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("excludes") != std::string::npos, o.err);
  o = run_app(tmp, "troupe-predict",
              "--export " + tmp.path() + " --input x.tsv --output p.csv");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find(tmp.file("manifest.json") + ": no such file")
               != std::string::npos,
             o.err);
  troupe::test::write_file(tmp.file("manifest.json"),
                           R"({"format": "troupe-exports", "version": 1,
                               "exports": []})");
  o = run_app(tmp, "troupe-predict",
              "--export " + tmp.path() + " --input x.tsv --output p.npy");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("expected a .csv") != std::string::npos, o.err);
  o = run_app(tmp, "troupe-predict",
              "--export " + tmp.path() + " --input x.tsv --output p.csv");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("no export at all") != std::string::npos, o.err);
}

BOOST_AUTO_TEST_SUITE_END()
