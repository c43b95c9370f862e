// troupe-clicks driven as a user drives it: the logs it writes read back
// with the click-log reader, the planted model's figures it prints, and
// its errors.
#include <boost/test/unit_test.hpp>

#include "app_runner.hpp"
#include "runtime/data/click_data.hpp"

using namespace troupe::test;

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

BOOST_AUTO_TEST_SUITE_END()
