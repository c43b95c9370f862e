// CSV datasets, float targets, the classes, the features each process
// reads and the validation split (the suite user_data, with
// user_data_test.cpp's .npy and .npz files).
#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>

#include "runtime/base/errc.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/user_files.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(user_data)

BOOST_AUTO_TEST_CASE(csv_with_quotes_crlf_and_the_label_in_the_middle) {
  temp_dir dir;
  auto d = read_csv(
    dir, "\"a\",class,\"b, c\"\r\n1.5,2,-3\r\n\r\n\"4\",0,5e-1\r\n", "class");
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->count == 2);
  BOOST_TEST(d->width == 2);
  BOOST_TEST(d->height == 1);
  BOOST_TEST(d->classes == 3);
  BOOST_TEST(d->features.to_floats()
             == (std::vector<float>{1.5f, -3.f, 4.f, 0.5f}));
  BOOST_TEST(d->labels == (std::vector<int32_t>{2, 0}));
  // No label column: every column is a feature (troupe-predict's input).
  d = read_csv(dir, "a,b,c\n1,2,3\n4,5,6\n", "");
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->count == 2);
  BOOST_TEST(d->width == 3);
  BOOST_TEST(d->labels.empty());
  BOOST_TEST(d->features.to_floats()[5] == 6.f);
}

BOOST_AUTO_TEST_CASE(bad_csv_files_name_the_file_line_and_column) {
  temp_dir dir;
  auto at = [&](int line) {
    return dir.file("d.csv") + ":" + std::to_string(line) + ": ";
  };
  auto cases = std::vector<std::pair<std::string, std::string>>{
    {"",
     dir.file("d.csv") + ": empty (expected a header row naming the columns)"},
    {"x,label\n", dir.file("d.csv") + ": a header but no samples"},
    {"x,y\n1,2\n",
     at(1) + "no column named \"label\" for the labels (data.label_column)"},
    {"label\n1\n", at(1) + "no feature columns beside the labels"},
    {"x,x,label\n1,2,0\n", at(1) + "column \"x\" is named twice"},
    {"x,label\n1,0\n2,1,3\n", at(3) + "3 fields, the header names 2"},
    {"x,label\n1,0\n\nabc,1\n",
     at(4) + "column \"x\": \"abc\" is not a number"},
    {"x,label\n,0\n", at(2) + "column \"x\" is empty"},
    {"x,label\n1,0.5\n",
     at(2) + "column \"label\": label \"0.5\" is not an integer"},
    {"x,label\n1,-2\n",
     at(2) + "column \"label\": label -2 (labels are 0..65535)"},
    {"x,label\n1,70000\n", at(2) + "column \"label\": label 70000"},
    {"x,label\nnan,1\n", at(2) + "column \"x\": \"nan\" is not finite"},
    {"x,label\n1e39,1\n", at(2) + "column \"x\": \"1e39\" is not finite"},
    {"x,label\n\"1,0\n", at(2) + "a quoted field is not closed"},
    {"x,label\n\"1\"2,0\n", at(2) + "text after a closing quote"},
    {"x,label\n1\"2,0\n", at(2) + "a quote inside an unquoted field"},
  };
  for (auto& [text, expected] : cases)
    BOOST_TEST(has(csv_error(dir, text), expected), expected + " <- " + text);
  BOOST_TEST(
    has(why(load_csv(dir.file("none.csv"), "label")), ": no such file"));
}

// Float targets (mean squared error, binary cross-entropy): (N,) or (N, K)
// arrays of any numeric type, and one or more CSV columns.
BOOST_AUTO_TEST_CASE(float_targets_from_npy_and_csv) {
  temp_dir dir;
  auto x = npy("<f4", "(2, 2)", bytes_of<float>({1, 2, 3, 4}));
  write_file(dir.file("x.npy"), x);
  auto targets = [&](const std::string& y, target_kind k) {
    write_file(dir.file("y.npy"), y);
    return load_npy(dir.file("x.npy"), dir.file("y.npy"), k);
  };
  auto d = targets(npy("<f8", "(2,)", bytes_of<double>({0.25, -7.5})),
                   target_kind::values);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->targets == (std::vector<float>{0.25f, -7.5f}));
  BOOST_TEST(d->labels.empty());
  BOOST_TEST(d->classes == 1);
  d = targets(npy("<f4", "(2, 3)", bytes_of<float>({1, 0, 1, 0, 0, 1})),
              target_kind::probabilities);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->classes == 3);
  BOOST_TEST(d->targets[5] == 1.f);
  d = targets(npy("<i8", "(2,)", bytes_of<int64_t>({1, 0})),
              target_kind::probabilities);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->targets == (std::vector<float>{1.f, 0.f}));
  // Samples picked out keep their targets together.
  std::vector<float> xs(4), ts(2);
  d = targets(npy("<f4", "(2, 2)", bytes_of<float>({1, 2, 3, 4})),
              target_kind::values);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  const uint32_t idx[] = {1};
  gather_batch(*d, idx, 1, xs.data(), nullptr, ts.data());
  BOOST_TEST(ts == (std::vector<float>{3.f, 4.f}));

  auto refused = [&](const std::string& y, target_kind k) {
    auto r = targets(y, k);
    BOOST_TEST(!r);
    return why(r);
  };
  auto y_at = dir.file("y.npy") + ": ";
  BOOST_TEST(refused(npy("<f4", "(2,)", bytes_of<float>({0.5f, 1.5f})),
                     target_kind::probabilities)
             == y_at
                  + "target 0 of sample 1 is 1.500000; binary "
                    "cross-entropy needs targets in [0, 1]");
  BOOST_TEST(refused(npy("<f4", "(2,)", bytes_of<float>({0.5f, NAN})),
                     target_kind::values)
             == y_at
                  + "target 0 of sample 1 is not finite (or too large "
                    "for float32)");
  BOOST_TEST(
    refused(npy("<f4", "(3,)", bytes_of<float>({1, 2, 3})), target_kind::values)
    == y_at + "3 targets for 2 samples in " + dir.file("x.npy"));
  BOOST_TEST(refused(npy("<f4", "(2, 1, 1)", bytes_of<float>({1, 2})),
                     target_kind::values)
             == y_at + "targets of shape (2, 1, 1) (expected (N,) or (N, K))");
  BOOST_TEST(refused(npy("<f4", "(2, 0)", ""), target_kind::values)
             == y_at + "shape (2, 0): 1 to 65536 targets per sample");
  // Class labels stay integers.
  BOOST_TEST(
    refused(npy("<f4", "(2,)", bytes_of<float>({0, 1})), target_kind::classes)
    == y_at + "labels must be integers, not floats");

  write_file(dir.file("d.csv"), "a,y1,b,y0\n1,0.5,2,-1\n3,1e-3,4,2\n");
  auto c = load_csv(dir.file("d.csv"), {"y0", "y1"}, target_kind::values);
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_TEST(c->width == 2);
  BOOST_TEST(c->features.to_floats()
             == (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  BOOST_TEST(c->classes == 2);
  BOOST_TEST(c->targets == (std::vector<float>{-1.f, 0.5f, 2.f, 1e-3f}));
  auto at = dir.file("d.csv") + ":";
  auto csv_refused = [&](const std::string& text,
                         std::vector<std::string> columns, target_kind k) {
    write_file(dir.file("d.csv"), text);
    auto r = load_csv(dir.file("d.csv"), columns, k);
    BOOST_TEST(!r);
    return why(r);
  };
  BOOST_TEST(csv_refused("a,y\n1,x\n", {"y"}, target_kind::values)
             == at + "2: column \"y\": target \"x\" is not a number");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"y"}, target_kind::probabilities)
             == at
                  + "2: column \"y\": target 2; binary cross-entropy "
                    "needs targets in [0, 1]");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"y", "z"}, target_kind::values)
             == at
                  + "1: no column named \"z\" for the targets "
                    "(data.label_column)");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"y", "y"}, target_kind::values)
             == at + "1: column \"y\" is named twice in data.label_column");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"a", "y"}, target_kind::values)
             == at + "1: no feature columns beside the labels");
}

// load_datasets: the config's loss says what the labels are; a validation
// split keeps each sample's targets.
BOOST_AUTO_TEST_CASE(float_targets_through_load_datasets) {
  temp_dir dir;
  std::string rows = "x,y\n";
  for (int i = 0; i < 10; ++i)
    rows += std::to_string(i) + "," + std::to_string(2 * i) + ".5\n";
  auto cfg = csv_set(dir, rows, "x,y\n1,2\n");
  cfg.label_columns = {"y"};
  cfg.targets = target_kind::values;
  cfg.validation_split = 0.3;
  auto sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.count == 7);
  BOOST_TEST(sets->validation.count == 3);
  BOOST_TEST(sets->validation.classes == 1);
  for (auto* d : {&sets->train, &sets->validation})
    for (int64_t i = 0; i < d->count; ++i)
      BOOST_TEST(d->targets[static_cast<size_t>(i)]
                 == 2 * d->features.to_floats()[static_cast<size_t>(i)] + 0.5f);
  // A test set with another number of targets.
  write_file(dir.file("test.csv"), "x,y,z\n1,2,3\n");
  cfg.label_columns = {"y", "z"};
  write_file(dir.file("train.csv"), "x,y,z,w\n1,2,3,4\n2,3,4,5\n");
  cfg.validation_split = 0;
  sets = load_datasets(cfg);
  BOOST_TEST(!sets);
  BOOST_TEST(why(sets)
             == dir.file("test.csv")
                  + ": test samples are 1x1x1 with 2 "
                    "targets, but "
                  + dir.file("train.csv")
                  + " has training samples of 1x2x1 with 2 targets");
}

BOOST_AUTO_TEST_CASE(classes_come_from_the_data_or_from_the_config) {
  temp_dir dir;
  auto cfg = csv_set(dir, "x,label\n1,0\n2,4\n", "x,label\n1,6\n");
  auto sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.classes == 7); // the test set's 6 counts too
  BOOST_TEST(sets->test.classes == 7);
  cfg.file_classes = 10;
  sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.classes == 10);
  cfg.file_classes = 5;
  BOOST_TEST(why(load_datasets(cfg))
             == dir.file("test.csv")
                  + ": label 6 of sample 0 is not below data.classes (5)");
  // One class in the data still makes a two-class problem.
  write_file(dir.file("test.csv"), "x,label\n1,0\n");
  write_file(dir.file("train.csv"), "x,label\n1,0\n");
  cfg.file_classes = 0;
  sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.classes == 2);
}

// Each process reads the features it needs: a training node not the test
// set's, the chief without workers not the training set's, unless the
// validation split it scores lies in it; labels and shapes always. .npy
// features are mapped where they lie, as the file stores them.
BOOST_AUTO_TEST_CASE(each_process_reads_the_features_it_needs) {
  temp_dir dir;
  write_file(dir.file("x.npy"),
             npy("|u1", "(3, 2)",
                 bytes_of<uint8_t>({0, 51, 102, 153, 204, 255})));
  write_file(dir.file("y.npy"),
             npy("|u1", "(3,)", bytes_of<uint8_t>({0, 1, 2})));
  data_config cfg;
  cfg.format = data_config::kind::npy;
  cfg.train_files = cfg.test_files = {dir.file("x.npy")};
  cfg.train_label_files = cfg.test_label_files = {dir.file("y.npy")};
  auto all = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(all, why(all));
  BOOST_TEST((all->train.features.stored() == feature_store::type::u8));
  BOOST_TEST(all->train.features.to_floats()[5] == 1.f);
  auto training = load_datasets(cfg, data_needs::training());
  BOOST_REQUIRE_MESSAGE(training, why(training));
  BOOST_TEST(training->train.features.rows() == 3);
  BOOST_TEST(training->test.features.empty());
  BOOST_TEST(training->test.labels == all->test.labels);
  BOOST_TEST(training->test.classes == 3);
  BOOST_TEST(!training->read.test);
  auto scoring = load_datasets(cfg, data_needs::scoring(cfg));
  BOOST_REQUIRE_MESSAGE(scoring, why(scoring));
  BOOST_TEST(scoring->train.features.empty());
  BOOST_TEST(scoring->train.count == 3);
  BOOST_TEST(scoring->test.features.rows() == 3);
  cfg.validation_split = 1.0 / 3;
  scoring = load_datasets(cfg, data_needs::scoring(cfg));
  BOOST_REQUIRE_MESSAGE(scoring, why(scoring));
  BOOST_TEST(scoring->validation.features.rows() == 1);
  BOOST_TEST(scoring->train.features.rows() == 2);
}

BOOST_AUTO_TEST_CASE(a_validation_split_holds_out_the_same_samples_everywhere) {
  temp_dir dir;
  // Sample i has feature i: where each sample went can be read back.
  std::string train = "x,label\n";
  for (int i = 0; i < 100; ++i)
    train += std::to_string(i) + "," + std::to_string(i % 3) + "\n";
  auto cfg = csv_set(dir, train, "x,label\n1,0\n2,1\n");
  cfg.validation_split = 0.2;
  auto sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.count == 80);
  BOOST_TEST(sets->validation.count == 20);
  BOOST_TEST(sets->validation.features.to_floats().size() == 20u);
  BOOST_TEST(sets->validation.classes == 3);
  BOOST_TEST(std::string{sets->watched_name()} == "validation");
  BOOST_TEST(&sets->watched() == &sets->validation);
  // Every sample is in exactly one set, with its own label; each set keeps
  // the file's order; a shuffle chose them (not the last 20).
  std::vector<int> seen(100, 0);
  for (auto* d : {&sets->train, &sets->validation}) {
    float last = -1;
    for (int64_t i = 0; i < d->count; ++i) {
      auto x = d->features.to_floats()[static_cast<size_t>(i)];
      BOOST_TEST(x > last);
      last = x;
      ++seen[static_cast<size_t>(x)];
      BOOST_TEST(d->labels[static_cast<size_t>(i)] == static_cast<int>(x) % 3);
    }
  }
  BOOST_TEST(std::count(seen.begin(), seen.end(), 1) == 100);
  BOOST_TEST(sets->validation.features.to_floats().front() < 80);
  // Another process loading the same files gets the same split; another
  // seed, another one.
  auto again = load_datasets(cfg);
  BOOST_REQUIRE(again);
  BOOST_TEST(again->validation.features.to_floats()
             == sets->validation.features.to_floats());
  cfg.validation_seed = 2;
  auto other = load_datasets(cfg);
  BOOST_REQUIRE(other);
  BOOST_TEST(other->validation.count == 20);
  BOOST_TEST(other->validation.features.to_floats()
             != sets->validation.features.to_floats());
  // A fraction that leaves a set empty is refused, naming the file.
  cfg.validation_split = 0.001;
  BOOST_TEST(
    why(load_datasets(cfg))
        .find("data.validation_split 0.001000 of the 100 training samples of "
              + dir.file("train.csv") + " leaves no validation sample")
      != std::string::npos,
    why(load_datasets(cfg)));
  // Without a split the test set is watched.
  cfg.validation_split = 0;
  auto plain = load_datasets(cfg);
  BOOST_REQUIRE(plain);
  BOOST_TEST(plain->validation.count == 0);
  BOOST_TEST(std::string{plain->watched_name()} == "test");
}

BOOST_AUTO_TEST_SUITE_END()
