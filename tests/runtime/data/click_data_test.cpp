// Click logs (runtime/data/click_data.hpp): generated logs with a planted model
// read back by the reader, tokens hashed per field, log-loss and AUC
// against hand-computed values, and bad files, each refused with the file,
// the line, the column and the reason.
#include "runtime/data/click_data.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <fstream>
#include <sstream>

#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// 1 numeric and 2 categorical fields: 4 columns.
const click_schema small{1, 2, 1000};

} // namespace

BOOST_AUTO_TEST_SUITE(click_data)

BOOST_AUTO_TEST_CASE(generated_logs_read_back_with_their_planted_scores) {
  temp_dir dir;
  click_generator_config cfg;
  cfg.schema = {2, 3, uint64_t{1} << 20};
  cfg.train = 3000;
  cfg.test = 2000;
  cfg.values_per_field = 500;
  auto scores = generate_click_logs(cfg, dir.file("train.tsv"),
                                    dir.file("test.tsv"));
  BOOST_REQUIRE_MESSAGE(scores, why(scores));
  auto train = load_click_log(dir.file("train.tsv"), cfg.schema);
  auto test = load_click_log(dir.file("test.tsv"), cfg.schema);
  BOOST_REQUIRE_MESSAGE(train, why(train));
  BOOST_REQUIRE_MESSAGE(test, why(test));
  BOOST_TEST(train->count == 3000);
  BOOST_TEST(test->count == 2000);
  BOOST_TEST(train->numeric.size() == 6000u);
  BOOST_TEST(train->offsets.size() == 3000u * 3 + 1);
  size_t multi = 0;
  for (int64_t i = 0; i < train->count; ++i) {
    auto [b0, e0] = train->field(i, 0); // multi-valued: 1 to 3 values
    BOOST_REQUIRE(e0 - b0 >= 1);
    BOOST_REQUIRE(e0 - b0 <= 3);
    multi += static_cast<size_t>(e0 - b0 > 1);
    for (int f = 1; f < 3; ++f) {
      auto [b, e] = train->field(i, f);
      BOOST_REQUIRE(e - b == 1);
      BOOST_REQUIRE(*b < cfg.schema.vocabulary);
    }
  }
  BOOST_TEST(multi > 1000u);
  // The planted model knows something: better than the click rate alone
  // (whose log-loss is the labels' entropy) and than chance ranking.
  double c = scores->test_click_rate;
  BOOST_TEST(c > 0.1);
  BOOST_TEST(c < 0.9);
  double entropy = -(c * std::log(c) + (1 - c) * std::log(1 - c));
  BOOST_TEST(scores->test_log_loss < entropy - 0.02);
  BOOST_TEST(scores->test_auc > 0.65);
  BOOST_TEST(scores->train_log_loss < entropy + 0.05);
  // The same config makes the same files.
  auto again = generate_click_logs(cfg, dir.file("a.tsv"), dir.file("b.tsv"));
  BOOST_REQUIRE(again);
  BOOST_TEST((slurp(dir.file("a.tsv")) == slurp(dir.file("train.tsv"))));
  BOOST_TEST(again->test_log_loss == scores->test_log_loss);
}

BOOST_AUTO_TEST_CASE(tokens_are_hashed_with_their_field) {
  temp_dir dir;
  write_file(dir.file("c.tsv"), "1\t0.5\tab12\tab12\r\n"
                                "\n"
                                "0\t\tab12\t\n");
  auto d = load_click_log(dir.file("c.tsv"), small);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->count == 2); // the blank line is skipped, CRLF read
  BOOST_TEST((d->labels == std::vector<float>{1, 0}));
  BOOST_TEST((d->numeric == std::vector<float>{0.5f, 0.f})); // empty: 0
  auto [a, ae] = d->field(0, 0);
  auto [b, be] = d->field(0, 1);
  auto [c, ce] = d->field(1, 0);
  auto [m, me] = d->field(1, 1);
  BOOST_TEST(*a != *b); // one token, two fields, two ids
  BOOST_TEST(*a == *c); // one token, one field, one id
  BOOST_TEST(me == m);  // empty: no value
  BOOST_TEST(*a == click_token_id("ab12", 4, 0, 1000));
  BOOST_TEST(*a < 1000u);
}

BOOST_AUTO_TEST_CASE(log_loss_and_auc_by_hand) {
  std::vector<float> y{0, 0, 1, 1};
  BOOST_TEST(roc_auc({0.1, 0.4, 0.35, 0.8}, y) == 0.75);
  BOOST_TEST(roc_auc({0.5, 0.5, 0.5, 0.5}, y) == 0.5); // ties count half
  BOOST_TEST(roc_auc({0.9, 0.8, 0.1, 0.2}, y) == 0.0);
  BOOST_TEST(roc_auc({0.1, 0.2}, {1, 1}) == 0.5); // one class
  double expected =
    -(std::log(0.9) + std::log(0.8) + std::log(0.7) + std::log(0.4)) / 4;
  BOOST_TEST(log_loss({0.1, 0.2, 0.7, 0.4}, y) == expected,
             boost::test_tools::tolerance(1e-12));
  // Certainty that is wrong costs log(1e7), not infinity.
  BOOST_TEST(std::isfinite(log_loss({1.0}, {0})));
}

BOOST_AUTO_TEST_CASE(bad_click_logs_name_the_file_line_and_column) {
  temp_dir dir;
  auto path = dir.file("bad.tsv");
  auto refused = [&](const std::string& text) {
    write_file(path, text);
    auto d = load_click_log(path, small);
    BOOST_TEST(!d);
    return d ? std::string{} : describe(d.error());
  };
  const std::string good = "1\t0.5\tx\ty\n";
  BOOST_TEST(refused("") == path + ": no click lines");
  BOOST_TEST(refused("\n\r\n") == path + ": no click lines");
  BOOST_TEST(refused("2\t0.5\tx\ty\n")
             == path + ":1: column 1 (label): expected 0 or 1, found \"2\"");
  BOOST_TEST(refused(good + "yes\t0.5\tx\ty\n")
             == path + ":2: column 1 (label): expected 0 or 1, found \"yes\"");
  BOOST_TEST(refused(good + good + "1\t0.5\tx\n")
             == path
                  + ":3: 3 columns, expected 4 (1 label, 1 numeric, 2 "
                    "categorical)");
  BOOST_TEST(refused("1\t0.5\tx\ty\tz\n")
             == path
                  + ":1: more than 4 tab-separated columns (1 label, 1 "
                    "numeric, 2 categorical)");
  BOOST_TEST(refused("1\tabc\tx\ty\n")
             == path
                  + ":1: column 2 (numeric field 1): \"abc\" is not a "
                    "number");
  BOOST_TEST(refused("1\t0.5x\tx\ty\n")
             == path
                  + ":1: column 2 (numeric field 1): \"0.5x\" is not a "
                    "number");
  BOOST_TEST(refused("1\t1e99\tx\ty\n")
             == path
                  + ":1: column 2 (numeric field 1): \"1e99\" is not a "
                    "number");
  BOOST_TEST(refused("1\tnan\tx\ty\n")
             == path
                  + ":1: column 2 (numeric field 1): \"nan\" is not "
                    "finite");
  BOOST_TEST(refused("1\t0.5\ta,,b\ty\n")
             == path
                  + ":1: column 3 (categorical field 1): an empty value "
                    "in \"a,,b\"");
  BOOST_TEST(refused("1\t0.5\tx\ty,\n")
             == path
                  + ":1: column 4 (categorical field 2): an empty value "
                    "in \"y,\"");
  BOOST_TEST(refused("1\t0.5\tx\t" + std::string(size_t{1} << 20, 'z') + "\n")
             == path + ":1: a line of more than 1 MiB");
  auto missing = load_click_log(dir.file("none.tsv"), small);
  BOOST_TEST(!missing);
  BOOST_TEST((missing.error() == errc::file_not_found));
}

BOOST_AUTO_TEST_SUITE_END()
