#include "runtime/config/config.hpp"
#include "runtime/data/inflated_cache.hpp"

#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <dirent.h>
#include <thread>

#include "runtime/base/errc.hpp"
#include "runtime/config/config_text.hpp"
#include "runtime/config/run_identity.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

/// An edit of synthetic_config (its first `from` made `to`) and the error
/// the edited text must give.
struct bad_edit {
  std::string from, to, error;
};

void expect_errors(const std::vector<bad_edit>& edits) {
  for (auto& e : edits)
    BOOST_TEST_CONTEXT("the edit to " << e.to) {
      BOOST_TEST(error_of(replace_first(synthetic_config, e.from, e.to))
                 == e.error);
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(config)

BOOST_AUTO_TEST_CASE(a_valid_file_fills_the_structs) {
  auto cfg = parse_run_config(synthetic_config, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->name == "t");
  BOOST_TEST((cfg->model.type == model_config::kind::mlp));
  BOOST_TEST(cfg->model.hidden == std::vector<int>{8});
  BOOST_TEST((cfg->data.format == data_config::kind::synthetic));
  BOOST_TEST(cfg->data.width == 4);
  BOOST_TEST(cfg->training.batch_size == 16);
  BOOST_TEST(cfg->training.epochs == 10); // default
  BOOST_TEST(cfg->training.optimizer.momentum == 0.5);
  BOOST_TEST(cfg->training.optimizer.schedule.staircase);
}

BOOST_AUTO_TEST_CASE(wrong_type_names_path_expectation_and_value) {
  expect_errors({
    {R"("batch_size": 16)", R"("batch_size": "abc")",
     R"(cfg.json: /training/batch_size: expected a positive integer <= 1048576, found "abc")"},
    {R"("hidden": [8])", R"("hidden": [8, -1])",
     "cfg.json: /model/hidden/1: expected a positive integer <= 65536, found "
     "-1"},
    {R"("type": "momentum")", R"("type": "adamw")",
     R"(cfg.json: /training/optimizer/type: expected one of sgd|momentum|adam, found "adamw")"},
    {R"("staircase": true)", R"("staircase": 1)",
     "cfg.json: /training/optimizer/schedule/staircase: expected true or "
     "false, found 1"},
  });
}

BOOST_AUTO_TEST_CASE(missing_required_key) {
  expect_errors({
    {R"("model": { "type": "mlp", "hidden": [8] },)", "",
     R"(cfg.json: /model: missing required key "model")"},
    {R"("format": "synthetic", )", "",
     R"(cfg.json: /data/format: missing required key "format")"},
  });
}

BOOST_AUTO_TEST_CASE(unknown_keys_are_refused) {
  expect_errors({
    {R"("batch_size": 16)", R"("batch_size": 16, "batchsize": 32)",
     R"(cfg.json: /training/batchsize: unknown key "batchsize")"},
    {R"("name": "t",)", R"("name": "t", "x": 1,)",
     R"(cfg.json: /x: unknown key "x")"},
  });
}

BOOST_AUTO_TEST_CASE(missing_dataset_file_names_the_key_and_path) {
  auto text = replace_first(
    synthetic_config, R"({ "format": "synthetic", "width": 4, "classes": 3 })",
    R"({ "format": "idx", "dir": "/nonexistent/fmnist" })");
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE(!cfg);
  BOOST_TEST((cfg.error() == errc::file_not_found));
  BOOST_TEST(describe(cfg.error())
             == "cfg.json: /data/train_images: dataset file not found: "
                "/nonexistent/fmnist/train-images-idx3-ubyte.gz");
}

// IDX and .npz sets: compressed files are inflated once into a cache
// folder and mapped ("read": "map", the default), or into memory.
BOOST_AUTO_TEST_CASE(idx_and_npz_sets_read_through_a_cache_or_memory) {
  troupe::test::temp_dir dir;
  for (auto* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                  "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    troupe::test::write_file(dir.file(f), "");
  const std::string synthetic =
    R"({ "format": "synthetic", "width": 4, "classes": 3 })";
  auto idx = [&](const std::string& more) {
    return replace_first(synthetic_config, synthetic,
                         R"({ "format": "idx", "dir": ")" + dir.path() + "\""
                           + more + " }");
  };
  auto cfg = parse_run_config(idx(""), "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->data.cache_dir == default_data_cache_dir());
  BOOST_TEST(!cfg->data.cache_dir.empty());
  cfg = parse_run_config(idx(R"(, "cache_dir": ")" + dir.file("c") + "\""),
                         "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->data.cache_dir == dir.file("c"));
  cfg = parse_run_config(idx(R"(, "read": "memory")"), "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->data.cache_dir.empty());
  BOOST_TEST(error_of(idx(R"(, "read": "stream")"))
             == "cfg.json: /data/read: expected one of map|memory, found "
                "\"stream\"");
  // Formats that inflate nothing take no cache folder.
  BOOST_TEST(
    error_of(replace_first(synthetic_config, synthetic,
                           R"({ "format": "synthetic", "cache_dir": "c" })"))
    == R"(cfg.json: /data/cache_dir: unknown key "cache_dir")");
}

BOOST_AUTO_TEST_CASE(npy_and_csv_data_sections) {
  troupe::test::temp_dir dir;
  for (auto* f : {"x.npy", "y.npy", "tx.npy", "ty.npy", "a.csv", "b.csv"})
    troupe::test::write_file(dir.file(f), "");
  auto data = [&](const std::string& section) {
    return replace_first(
      synthetic_config,
      R"({ "format": "synthetic", "width": 4, "classes": 3 })", section);
  };
  auto npy = data(R"({ "format": "npy", "dir": ")" + dir.path()
                  + R"(", "train": "x.npy", "train_labels": "y.npy",
                       "test": "tx.npy", "test_labels": "ty.npy",
                       "classes": 12 })");
  auto cfg = parse_run_config(npy, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST((cfg->data.format == data_config::kind::npy));
  BOOST_TEST(cfg->data.train_label_files
             == std::vector<std::string>{dir.file("y.npy")});
  BOOST_TEST(cfg->data.file_classes == 12);
  auto csv = data(R"({ "format": "csv", "dir": ")" + dir.path()
                  + R"(", "train": "a.csv", "test": "b.csv",
                       "label_column": "target" })");
  cfg = parse_run_config(csv, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->data.label_columns == std::vector<std::string>{"target"});
  BOOST_TEST(cfg->data.train_files
             == std::vector<std::string>{dir.file("a.csv")});
  BOOST_TEST(cfg->data.file_classes == 0);
  troupe::test::write_file(dir.file("d.npz"), "");
  cfg = parse_run_config(data(R"({ "format": "npz", "dir": ")" + dir.path()
                              + R"(", "file": "d.npz", "test": "x_val" })"),
                         "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->data.archive == dir.file("d.npz"));
  BOOST_TEST(
    cfg->data.arrays
    == (std::vector<std::string>{"x_train", "y_train", "x_val", "y_test"}));
  BOOST_TEST(error_of(data(R"({ "format": "npz", "dir": ")" + dir.path()
                           + R"(", "file": "d.npz", "train_labels": "" })"))
             == "cfg.json: /data/train_labels: expected the name of an array "
                "in the archive");
  // What is missing or wrong is named by its key.
  BOOST_TEST(error_of(data(R"({ "format": "npy" })"))
             == R"(cfg.json: /data/train: missing required key "train")");
  BOOST_TEST(error_of(data(R"({ "format": "csv", "dir": ")" + dir.path()
                           + R"(", "train": "a.csv", "test": "c.csv" })"))
             == "cfg.json: /data/test: dataset file not found: "
                  + dir.file("c.csv"));
  BOOST_TEST(error_of(data(R"({ "format": "csv", "dir": ")" + dir.path()
                           + R"(", "train": "a.csv", "test": "b.csv",
                                "label_column": "" })"))
             == "cfg.json: /data/label_column: expected a column name");
  BOOST_TEST(error_of(data(R"({ "format": "idx", "classes": 1 })"))
               .find("cfg.json: /data/classes: ")
             == 0);
}

// The loss says what the labels are; float targets come from npy, npz or
// csv, where a list of columns may hold several per sample.
BOOST_AUTO_TEST_CASE(a_loss_on_float_targets_reads_them) {
  troupe::test::temp_dir dir;
  for (auto* f : {"a.csv", "b.csv"})
    troupe::test::write_file(dir.file(f), "");
  auto config = [&](const std::string& loss, const std::string& data,
                    const std::string& cluster = "{}") {
    return R"({ "model": { "layers": [ { "type": "dense", "units": 2 } ],
                           "loss": ")"
           + loss + R"(" },
               "data": )"
           + data + R"(, "cluster": )" + cluster + " }";
  };
  auto csv = R"({ "format": "csv", "dir": ")" + dir.path()
             + R"(", "train": "a.csv", "test": "b.csv",
                  "label_column": ["y1", "y2"] })";
  auto cfg = parse_run_config(config("mse", csv), "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST((cfg->model.loss == loss_kind::mean_squared_error));
  BOOST_TEST((cfg->data.targets == target_kind::values));
  BOOST_TEST(cfg->data.label_columns == (std::vector<std::string>{"y1", "y2"}));
  cfg = parse_run_config(config("binary_cross_entropy", csv), "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST((cfg->data.targets == target_kind::probabilities));
  BOOST_TEST(error_of(config("softmax_cross_entropy", csv))
             == "cfg.json: /data/label_column: a list of columns holds float "
                "targets (model.loss binary_cross_entropy or "
                "mean_squared_error); softmax_cross_entropy reads one column "
                "of class labels");
  BOOST_TEST(
    error_of(config("mean_squared_error", R"({ "format": "synthetic" })"))
    == "cfg.json: /model/loss: mean_squared_error reads float "
       "targets, which data.format npy, npz and csv hold; found "
       "data.format \"synthetic\"");
  BOOST_TEST(error_of(config("mse", csv, R"({ "target_accuracy": 0.9 })"))
             == "cfg.json: /cluster/target_accuracy: a regression "
                "(mean_squared_error) has no accuracy to reach: drop "
                "target_accuracy");
  BOOST_TEST(
    error_of(config("mse", R"({ "format": "csv", "dir": ")" + dir.path()
                             + R"(", "train": "a.csv", "test": "b.csv",
                                    "label_column": ["y", ""] })"))
    == "cfg.json: /data/label_column/1: expected a column name");
  BOOST_TEST(error_of(config("hinge", csv)).find("cfg.json: /model/loss: ")
             == 0);
}

// An epsilon the float arithmetic would round to 0 (a layernorm's or
// Adam's) would divide 0 by 0 on a row of equal values or a weight whose
// gradient stays 0: refused.
BOOST_AUTO_TEST_CASE(an_epsilon_that_rounds_to_zero_is_refused) {
  auto layernorm = R"({ "model": { "layers": [
      { "type": "conv2d", "filters": 1 },
      { "type": "layernorm", "epsilon": 1e-50 },
      { "type": "flatten" }, { "type": "dense", "units": 5 } ] },
    "data": { "format": "synthetic", "height": 4, "width": 4,
              "classes": 5 } })";
  auto why = error_of(layernorm);
  BOOST_TEST(why.find("cfg.json: /model/layers/1/epsilon: ") == 0, why);
  BOOST_TEST(why.find("1.17549e-38") != std::string::npos, why);
  auto adam = replace_first(synthetic_config, R"("type": "momentum",)",
                            R"("type": "adam", "epsilon": 1e-46,)");
  why = error_of(adam);
  BOOST_TEST(why.find("cfg.json: /training/optimizer/epsilon: ") == 0, why);
}

// data.follow: one glob of a folder that grows, trained once in its order;
// what would contradict that is refused, naming the key.
BOOST_AUTO_TEST_CASE(a_followed_folder_is_one_open_epoch_in_order) {
  troupe::test::temp_dir dir;
  for (auto* f : {"part-000.tsv", "test.tsv"})
    troupe::test::write_file(dir.file(f), "");
  auto click_data = R"({ "format": "click", "dir": ")" + dir.path()
                    + R"(", "train": "part-*.tsv", "test": "test.tsv",
                         "numeric": 2, "categorical": 5,
                         "follow": { "poll_seconds": 30,
                                     "stop_after_idle_seconds": 600 } })";
  auto text = replace_first(
    replace_first(synthetic_config, R"({ "type": "mlp", "hidden": [8] })",
                  R"({ "type": "click", "embedding": { "dim": 4 } })"),
    R"({ "format": "synthetic", "width": 4, "classes": 3 })", click_data);
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->data.follow);
  BOOST_TEST(cfg->data.follow_glob == dir.file("part-*.tsv"));
  BOOST_TEST(cfg->data.follow_poll_s == 30);
  BOOST_TEST(cfg->data.follow_idle_stop_s == 600);
  BOOST_TEST(cfg->data.stream_train); // one plain part, streamed all the same
  BOOST_TEST(cfg->training.stream_order);
  BOOST_TEST(cfg->training.epochs == 1);
  // The glob is the set: a node or a chief started after more parts came
  // runs the same run.
  troupe::test::write_file(dir.file("part-001.tsv"), "");
  auto grown = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(grown, troupe::test::why(grown));
  BOOST_TEST(grown->data.train_files.size() == 2u);
  BOOST_TEST(training_identity(*grown) == training_identity(*cfg));
  auto with = [&](const std::string& training) {
    return error_of(replace_first(text, R"("batch_size": 16,)",
                                  R"("batch_size": 16, )" + training));
  };
  BOOST_TEST(with(R"("epochs": 3,)")
               .find("cfg.json: /training/epochs: has "
                     "no meaning while data.follow")
             == 0);
  BOOST_TEST(with(R"("order": "shuffled",)")
               .find("cfg.json: /training/order: a followed folder is "
                     "trained in its order")
             == 0);
  BOOST_TEST(with(R"("data_partition": "sharded",)")
               .find("cfg.json: /training/data_partition: a followed "
                     "folder is one stream")
             == 0);
  BOOST_TEST(error_of(replace_first(text, R"("train": "part-*.tsv")",
                                    R"("train": ["part-*.tsv"])"))
               .find("cfg.json: /data/train: with data.follow, one glob")
             == 0);
  BOOST_TEST(error_of(replace_first(text, R"("test": "test.tsv")",
                                    R"("test": "test.tsv", "read": "memory")"))
               .find("cfg.json: /data/read: a followed folder is read as a "
                     "stream")
             == 0);
  BOOST_TEST(error_of(replace_first(text, R"("poll_seconds": 30)",
                                    R"("poll_seconds": 30, "every": 1)"))
               .find("cfg.json: /data/follow/every")
             == 0);
}

BOOST_AUTO_TEST_CASE(click_models_and_click_logs_go_together) {
  troupe::test::temp_dir dir;
  for (auto* f : {"train.tsv", "test.tsv"})
    troupe::test::write_file(dir.file(f), "");
  auto click_data = R"({ "format": "click", "dir": ")" + dir.path()
                    + R"(", "train": "train.tsv", "test": "test.tsv",
                         "numeric": 2, "categorical": 5,
                         "vocabulary": 1000 })";
  auto text = replace_first(
    replace_first(synthetic_config, R"({ "type": "mlp", "hidden": [8] })",
                  R"({ "type": "click", "seed": 7,
                 "embedding": { "dim": 4, "init_scale": 0.01 } })"),
    R"({ "format": "synthetic", "width": 4, "classes": 3 })", click_data);
  text = replace_first(
    text, R"("batch_size": 16,)",
    R"("batch_size": 16, "sparse_optimizer": { "type": "adam",
                    "learning_rate": 0.002, "beta1": 0.8 },)");
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST((cfg->model.type == model_config::kind::click));
  BOOST_TEST(cfg->model.hidden == (std::vector<int>{64, 32}));
  BOOST_TEST(cfg->model.table.dim == 4);
  BOOST_TEST(cfg->model.table.init_scale == 0.01);
  // The table takes its size from the data and its seed from the model.
  BOOST_TEST(cfg->model.table.vocabulary == 1000u);
  BOOST_TEST(cfg->model.table.seed == 7u);
  BOOST_TEST(cfg->model.table_fields == 5);
  BOOST_TEST(cfg->data.click_numeric == 2);
  BOOST_TEST(cfg->data.train_files
             == (std::vector<std::string>{dir.file("train.tsv")}));
  // One plain file is read into memory, and every sample is shuffled.
  BOOST_TEST(!cfg->data.stream_train);
  BOOST_TEST(cfg->training.shuffle_block == 1);
  BOOST_TEST(!cfg->training.stream_order);
  // A drifting stream is trained in its own order; a run of either order
  // does not resume the other's checkpoints.
  auto in_order = parse_run_config(
    replace_first(text, R"("batch_size": 16,)",
                  R"("batch_size": 16, "order": "stream",)"),
    "cfg.json");
  BOOST_REQUIRE_MESSAGE(in_order, troupe::test::why(in_order));
  BOOST_TEST(in_order->training.stream_order);
  BOOST_TEST(training_identity(*in_order) != training_identity(*cfg));
  BOOST_TEST(error_of(replace_first(text, R"("batch_size": 16,)",
                                    R"("batch_size": 16, "order": "time",)"))
             == "cfg.json: /training/order: expected one of "
                "shuffled|stream, found \"time\"");
  // Gzipped or in parts, it is streamed, a block of 4096 at a time.
  for (auto* f : {"train-0.tsv.gz", "train-1.tsv.gz"})
    troupe::test::write_file(dir.file(f), "");
  auto parts = parse_run_config(replace_first(text, R"("train": "train.tsv")",
                                              R"("train": "train-*.tsv.gz")"),
                                "cfg.json");
  BOOST_REQUIRE_MESSAGE(parts, troupe::test::why(parts));
  BOOST_TEST(parts->data.train_files
             == (std::vector<std::string>{dir.file("train-0.tsv.gz"),
                                          dir.file("train-1.tsv.gz")}));
  BOOST_TEST(parts->data.stream_train);
  BOOST_TEST(parts->training.shuffle_block == 4096);
  BOOST_TEST(parts->data.click_block == 4096u);
  // "read" and shuffle_block say otherwise where given.
  auto in_memory = parse_run_config(
    replace_first(
      replace_first(text, R"("train": "train.tsv")",
                    R"("train": ["train-0.tsv.gz"], "read": "memory")"),
      R"("batch_size": 16,)", R"("batch_size": 16, "shuffle_block": 8,)"),
    "cfg.json");
  BOOST_REQUIRE_MESSAGE(in_memory, troupe::test::why(in_memory));
  BOOST_TEST(!in_memory->data.stream_train);
  BOOST_TEST(in_memory->training.shuffle_block == 8);
  BOOST_TEST(!cfg->data.skip_changed_files); // "stop" unless set
  auto skipping = parse_run_config(
    replace_first(text, R"("train": "train.tsv")",
                  R"("train": "train.tsv", "on_file_change": "skip")"),
    "cfg.json");
  BOOST_REQUIRE_MESSAGE(skipping, troupe::test::why(skipping));
  BOOST_TEST(skipping->data.skip_changed_files);
  BOOST_TEST(
    error_of(replace_first(text, R"("train": "train.tsv")",
                           R"("train": "train.tsv", "on_file_change": 1)"))
    == "cfg.json: /data/on_file_change: expected one of stop|skip, "
       "found 1");
  BOOST_TEST(
    error_of(replace_first(text, R"("train": "train.tsv")",
                           R"("train": "train.tsv", "read": "lazily")"))
    == R"(cfg.json: /data/read: expected one of memory|stream, found "lazily")");
  BOOST_TEST((cfg->training.sparse_optimizer.type
              == sparse_optimizer_config::kind::adam));
  BOOST_TEST(cfg->training.sparse_optimizer.learning_rate == 0.002);
  BOOST_TEST(cfg->training.sparse_optimizer.beta1 == 0.8);
  BOOST_TEST(embedding_dims(cfg->model) == (std::vector<int>{4}));
  // What does not fit is named by its key.
  BOOST_TEST(
    error_of(replace_first(
      synthetic_config,
      R"({ "format": "synthetic", "width": 4, "classes": 3 })", click_data))
    == "cfg.json: /data/format: click logs train a click model "
       "(model.type \"click\"), found model.type \"mlp\"");
  BOOST_TEST(error_of(replace_first(synthetic_config, R"("type": "mlp")",
                                    R"("type": "click")"))
             == "cfg.json: /model/type: a click model trains on click logs "
                "(data.format \"click\"), found data.format \"synthetic\"");
  auto with_cluster = [&](const std::string& extra) {
    return replace_first(text, "\"name\": \"t\",",
                         "\"name\": \"t\", " + extra + ",");
  };
  BOOST_TEST(error_of(with_cluster(R"("cluster": { "mode": "easgd" })"))
               .find("cfg.json: /cluster/mode: easgd is not supported "
                     "for a model with embedding tables")
             == 0);
  BOOST_TEST(
    error_of(replace_first(text, R"("vocabulary": 1000)",
                           R"("vocabulary": 1000, "validation_split": 0.1)"))
      .find("cfg.json: /data/validation_split: not supported for "
            "click logs yet")
    == 0);
  BOOST_TEST(
    error_of(replace_first(text, R"("categorical": 5,)", ""))
    == R"(cfg.json: /data/categorical: missing required key "categorical")");
  BOOST_TEST(
    error_of(replace_first(replace_first(text, R"("vocabulary": 1000)",
                                         R"("vocabulary": 100000000)"),
                           R"("dim": 4,)", R"("dim": 4, "rows": "fixed",)"))
      .find("cfg.json: /model/embedding/rows: a fixed table of "
            "100000000 rows")
    == 0);
  BOOST_TEST(error_of(replace_first(text, R"("type": "adam",
                    "learning_rate": 0.002)",
                                    R"("type": "rmsprop")"))
               .find("cfg.json: /training/sparse_optimizer/type: ")
             == 0);
}

BOOST_AUTO_TEST_CASE(an_external_model_and_external_data_go_together) {
  troupe::test::temp_dir dir;
  auto params = dir.file("model.safetensors");
  troupe::test::write_file(params, "");
  auto text = R"({ "name": "t",
    "model": { "type": "external", "parameters": ")"
              + params + R"(" },
    "data": { "format": "external", "train_samples": 600, "test_samples": 100 } })";
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST((cfg->model.type == model_config::kind::external));
  BOOST_TEST(cfg->model.parameters == params);
  BOOST_TEST(cfg->data.train_samples == 600);
  BOOST_TEST(cfg->data.test_samples == 100);
  BOOST_TEST(error_of(replace_first(text, R"("format": "external")",
                                    R"("format": "synthetic")"))
               .find("cfg.json: /model/type: an external model trains on "
                     "the user's own data")
             == 0);
  BOOST_TEST(
    error_of(replace_first(text, R"("train_samples": 600, )", ""))
    == R"(cfg.json: /data/train_samples: missing required key "train_samples")");
  BOOST_TEST(error_of(replace_first(text, R"("type": "external", )",
                                    R"("type": "external", "hidden": [8], )"))
               .find("cfg.json: /model/hidden:")
             == 0);
  // Only the chief's process reads the file (at the start of the run):
  // the other nodes parse the config without it.
  BOOST_TEST(parse_run_config(replace_first(text, params,
                                            dir.file("absent.safetensors")),
                              "cfg.json")
               .engaged());
  BOOST_TEST(
    error_of(replace_first(text, R"("name": "t",)",
                           R"("name": "t", "cluster": { "mode": "easgd" },)"))
      .find("cfg.json: /cluster/mode: easgd is not supported for an "
            "external model")
    == 0);
}

BOOST_AUTO_TEST_CASE(an_external_models_tables_and_their_optimizers) {
  troupe::test::temp_dir dir;
  auto params = dir.file("model.safetensors");
  auto text = R"({ "name": "t",
    "model": { "type": "external", "parameters": ")"
              + params + R"(", "seed": 3, "tables": [
      { "name": "user", "vocabulary": 1000, "dim": 8,
        "optimizer": { "type": "adam", "learning_rate": 0.01 } },
      { "name": "item", "vocabulary": 50 } ] },
    "data": { "format": "external", "train_samples": 600 },
    "training": { "sparse_optimizer": { "type": "sgd" } } })";
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  auto tables = embedding_tables(*cfg);
  BOOST_REQUIRE(tables.size() == 2u);
  BOOST_TEST(tables[0].table.name == "user");
  BOOST_TEST(tables[0].table.vocabulary == 1000u);
  BOOST_TEST(tables[0].table.dim == 8);
  BOOST_TEST((tables[0].optimizer.type == sparse_optimizer_config::kind::adam));
  BOOST_TEST(tables[0].optimizer.learning_rate == 0.01);
  // A table that names no optimizer takes training.sparse_optimizer.
  BOOST_TEST(tables[1].table.dim == 16);
  BOOST_TEST((tables[1].optimizer.type == sparse_optimizer_config::kind::sgd));
  BOOST_TEST(tables[0].table.seed != tables[1].table.seed);
  BOOST_TEST(embedding_dims(cfg->model) == (std::vector<int>{8, 16}));
  // The tables are part of what a checkpoint must fit.
  auto other = parse_run_config(
    replace_first(text, R"("dim": 8)", R"("dim": 4)"), "cfg.json");
  BOOST_REQUIRE(other);
  BOOST_TEST(training_identity(*cfg) != training_identity(*other));
  BOOST_TEST(
    error_of(replace_first(text, R"("name": "item")", R"("name": "user")"))
    == R"(cfg.json: /model/tables/1/name: a second table named "user")");
  BOOST_TEST(
    error_of(replace_first(text, R"("name": "item")", R"("name": "it em")"))
      .find("cfg.json: /model/tables/1/name: expected 1 to 64 "
            "letters")
    == 0);
  BOOST_TEST(
    error_of(replace_first(text, R"("vocabulary": 50)", R"("vocabulary": 0)"))
    == "cfg.json: /model/tables/1/vocabulary: expected a positive integer, "
       "found 0");
  BOOST_TEST(
    error_of(replace_first(text, R"(, "vocabulary": 50)", ""))
    == R"(cfg.json: /model/tables/1/vocabulary: missing required key "vocabulary")");
  BOOST_TEST(error_of(replace_first(text, R"("dim": 8,)", R"("dims": 8,)"))
               .find("cfg.json: /model/tables/0/dims:")
             == 0);
}

BOOST_AUTO_TEST_CASE(a_tables_admission_and_eviction) {
  troupe::test::temp_dir dir;
  auto params = dir.file("model.safetensors");
  auto text = R"({ "name": "t",
    "model": { "type": "external", "parameters": ")"
              + params + R"(", "tables": [
      { "name": "user", "vocabulary": 1000000,
        "admit": { "min_count": 3, "expected_keys": 5000 },
        "evict": { "steps_to_live": 200, "victims": "lfu" } },
      { "name": "item", "vocabulary": 50000,
        "admit": { "probability": 0.25 },
        "evict": { "max_rows": 800 } } ] },
    "data": { "format": "external", "train_samples": 600 } })";
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  auto tables = embedding_tables(*cfg);
  auto& user = tables[0].table;
  BOOST_TEST((user.admit.type == row_admission::kind::min_count));
  BOOST_TEST(user.admit.min_count == 3);
  BOOST_TEST(user.admit.expected_keys == 5000u);
  BOOST_TEST(user.admit.false_positive == 0.01);
  BOOST_TEST(user.evict.steps_to_live == 200);
  BOOST_TEST(user.evict.max_rows == 0u);
  BOOST_TEST((user.evict.victims == row_eviction::policy::lfu));
  auto& item = tables[1].table;
  BOOST_TEST((item.admit.type == row_admission::kind::probability));
  BOOST_TEST(item.admit.probability == 0.25);
  BOOST_TEST(item.evict.max_rows == 800u);
  BOOST_TEST((item.evict.victims == row_eviction::policy::lru));
  // Bounds may change on resume: they are not part of the identity.
  auto looser = parse_run_config(replace_first(text, R"("max_rows": 800)",
                                               R"("max_rows": 1600)"),
                                 "cfg.json");
  BOOST_REQUIRE(looser);
  BOOST_TEST(training_identity(*cfg) == training_identity(*looser));
  BOOST_TEST(
    error_of(replace_first(text, R"("probability": 0.25)",
                           R"("probability": 0.25, "min_count": 2)"))
      .find("cfg.json: /model/tables/1/admit: expected one of \"min_count\"")
    == 0);
  BOOST_TEST(error_of(replace_first(text, R"("evict": { "max_rows": 800 })",
                                    R"("evict": 800)"))
             == "cfg.json: /model/tables/1/evict: expected an object, found "
                "800");
  BOOST_TEST(
    error_of(replace_first(text, R"("min_count": 3)", R"("min_count": 1)"))
      .find("cfg.json: /model/tables/0/admit/min_count:")
    == 0);
  BOOST_TEST(
    error_of(
      replace_first(text, R"("probability": 0.25)", R"("probability": 0)"))
    == "cfg.json: /model/tables/1/admit/probability: expected a number > 0 "
       "and <= 1, found 0");
  BOOST_TEST(
    error_of(replace_first(text, R"("max_rows": 800)", R"("max_rows": 0)"))
      .find("cfg.json: /model/tables/1/evict: expected \"steps_to_live\" or "
            "\"max_rows\" above 0")
    == 0);
  BOOST_TEST(
    error_of(replace_first(text, R"("victims": "lfu")", R"("victims": "lifo")"))
    == "cfg.json: /model/tables/0/evict/victims: expected one of lru|lfu, "
       "found \"lifo\"");
  BOOST_TEST(error_of(replace_first(text, R"("expected_keys": 5000)",
                                    R"("expected_key": 5000)"))
               .find("cfg.json: /model/tables/0/admit/expected_key:")
             == 0);
  // The click model's table takes them too, but not with fixed rows.
  for (auto* f : {"train.tsv", "test.tsv"})
    troupe::test::write_file(dir.file(f), "");
  auto click = replace_first(
    replace_first(synthetic_config, R"({ "type": "mlp", "hidden": [8] })",
                  R"({ "type": "click",
                 "embedding": { "dim": 4, "evict": { "max_rows": 100 } } })"),
    R"({ "format": "synthetic", "width": 4, "classes": 3 })",
    R"({ "format": "click", "dir": ")" + dir.path()
      + R"(", "train": "train.tsv", "test": "test.tsv",
         "numeric": 2, "categorical": 5, "vocabulary": 1000 })");
  auto clicked = parse_run_config(click, "cfg.json");
  BOOST_REQUIRE_MESSAGE(clicked, troupe::test::why(clicked));
  BOOST_TEST(embedding_tables(*clicked)[0].table.evict.max_rows == 100u);
  BOOST_TEST(error_of(replace_first(click, R"("dim": 4,)",
                                    R"("dim": 4, "rows": "fixed",)"))
               .find("cfg.json: /model/embedding/evict: a table of fixed "
                     "rows holds every row from the start")
             == 0);
}

// training.export: its keys; every table keeps what changed its rows; a
// model without tables to export is refused, naming the key.
BOOST_AUTO_TEST_CASE(exports_of_the_tables) {
  troupe::test::temp_dir dir;
  auto params = dir.file("model.safetensors");
  auto model = R"("model": { "type": "external", "parameters": ")" + params
               + R"(", "tables": [ { "name": "user", "vocabulary": 1000 } ] },
    "data": { "format": "external", "train_samples": 600 }, )";
  auto cfg = parse_run_config("{" + model
                                + R"("training": { "export": { "dir": "out",
      "every_steps": 50, "every_seconds": 30, "keep": 3 } } })",
                              "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  auto& e = cfg->training.exports;
  BOOST_TEST(e.dir == "out");
  BOOST_TEST(e.every_steps == 50);
  BOOST_TEST(e.every_seconds == 30.0);
  BOOST_TEST(e.keep == 3);
  BOOST_TEST(embedding_tables(*cfg)[0].table.changes);
  cfg = parse_run_config("{" + model + R"("training": {} })", "cfg.json");
  BOOST_REQUIRE(cfg);
  BOOST_TEST(!embedding_tables(*cfg)[0].table.changes);
  auto refused = parse_run_config(
    R"({ "model": { "type": "mlp" }, "data": { "format": "synthetic" },
         "training": { "export": { "dir": "out" } } })",
    "cfg.json");
  BOOST_REQUIRE(!refused);
  BOOST_TEST(troupe::test::why(refused).find("/training/export: the model "
                                             "has no embedding tables")
               != std::string::npos,
             troupe::test::why(refused));
  refused = parse_run_config(
    "{" + model + R"("training": { "export": { "every_steps": 5 } } })",
    "cfg.json");
  BOOST_REQUIRE(!refused);
  BOOST_TEST(troupe::test::why(refused).find("missing required key")
               != std::string::npos,
             troupe::test::why(refused));
}

BOOST_AUTO_TEST_CASE(invalid_json_gives_line_and_column) {
  auto msg = error_of("{\n  \"name\": \"t\",\n  oops\n}");
  BOOST_TEST(msg.find("cfg.json: invalid JSON at line 3, column 4") == 0, msg);
}

BOOST_AUTO_TEST_CASE(value_checks_beyond_types) {
  auto text = replace_first(synthetic_config, R"("learning_rate": 0.1)",
                            R"("learning_rate": 0)");
  BOOST_TEST(error_of(text)
             == "cfg.json: /training/optimizer/learning_rate: expected a "
                "number > 0, found 0");
  text = replace_first(synthetic_config, R"("type": "mlp", "hidden": [8])",
                       R"("type": "softmax", "hidden": [8])");
  BOOST_TEST(
    error_of(text)
    == "cfg.json: /model/hidden: softmax regression has no hidden layers");
}

BOOST_AUTO_TEST_CASE(missing_config_file) {
  auto cfg = load_run_config("/nonexistent/run.json");
  BOOST_REQUIRE(!cfg);
  BOOST_TEST(describe(cfg.error())
             == "/nonexistent/run.json: config file not found");
}

// Every example in config/ must load: they are documentation that runs.
BOOST_AUTO_TEST_CASE(every_file_in_config_dir_loads) {
  std::string dir = std::string{TROUPE_SOURCE_DIR} + "/config";
  DIR* d = opendir(dir.c_str());
  BOOST_REQUIRE(d != nullptr);
  int loaded = 0;
  while (auto* entry = readdir(d)) {
    std::string name = entry->d_name;
    if (name.size() < 5 || name.substr(name.size() - 5) != ".json")
      continue;
    auto cfg = load_run_config(dir + "/" + name);
    BOOST_CHECK_MESSAGE(cfg, name << ": " << troupe::test::why(cfg));
    ++loaded;
  }
  closedir(d);
  BOOST_TEST(loaded >= 3);
}

BOOST_AUTO_TEST_CASE(data_partition_is_a_training_key) {
  auto cfg = parse_run_config(synthetic_config, "cfg.json");
  BOOST_REQUIRE(cfg);
  BOOST_TEST((cfg->training.partition == data_partition::shared)); // default
  for (auto p : {data_partition::shared, data_partition::replicated,
                 data_partition::sharded}) {
    auto text = replace_first(synthetic_config, R"("batch_size": 16)",
                              std::string{
                                R"("batch_size": 16, "data_partition": ")"}
                                + to_string(p) + "\"");
    auto c = parse_run_config(text, "cfg.json");
    BOOST_REQUIRE_MESSAGE(c, text);
    BOOST_TEST((c->training.partition == p));
  }
  auto e = error_of(
    replace_first(synthetic_config, R"("batch_size": 16)",
                  R"("batch_size": 16, "data_partition": "split")"));
  BOOST_TEST(e.find("/training/data_partition") != std::string::npos, e);
  BOOST_TEST(e.find("replicated") != std::string::npos, e); // the choices
}

BOOST_AUTO_TEST_CASE(numbers_sizes_and_nesting_beyond_limits) {
  // Each was an abort or a bare bad_alloc: now one line naming the path.
  auto e = error_of(replace_first(synthetic_config, R"("batch_size": 16)",
                                  R"("batch_size": 1e400)"));
  BOOST_TEST(e.find("cfg.json: invalid JSON: number overflow parsing '1e400'")
               != std::string::npos,
             e);
  e = error_of(replace_first(synthetic_config, R"("width": 4)",
                             R"("width": 4, "train_samples": 1000000000)"));
  BOOST_TEST(e.find("/data/train_samples: 1000000000 samples of 4 values: more "
                    "than 2^30 values")
               != std::string::npos,
             e);
  e = error_of(
    replace_first(synthetic_config, R"("width": 4)",
                  R"("width": 4096, "height": 4096, "channels": 4096)"));
  BOOST_TEST(e.find("/data/height: samples of") != std::string::npos, e);
  e = error_of(replace_first(synthetic_config, R"("hidden": [8])",
                             R"("hidden": [2147483647])"));
  BOOST_TEST(e.find("/model/hidden/0: expected a positive integer <= 65536")
               != std::string::npos,
             e);
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  e = error_of(replace_first(synthetic_config, R"("name": "t",)",
                             R"("name": "t", "x": )" + deep + ","));
  BOOST_TEST(e.find("nested deeper than 16 levels") != std::string::npos, e);
}

BOOST_AUTO_TEST_CASE(device_names_cpu_or_a_gpu) {
  BOOST_TEST(parse_device("cpu")->to_string() == "cpu");
  BOOST_TEST(parse_device("gpu")->to_string() == "gpu:0");
  BOOST_TEST(parse_device("gpu:0")->to_string() == "gpu:0");
  BOOST_TEST(parse_device("gpu:12")->index == 12);
  for (const char* bad : {"", "GPU", "gpu:", "gpu0", "gpu:-1", "gpu:1x",
                          "gpu:12345", "cuda:0", "cpu:0", " gpu"})
    BOOST_TEST(!parse_device(bad), "\"" << bad << "\" was accepted");
  auto cfg = parse_run_config(synthetic_config, "cfg.json");
  BOOST_REQUIRE(cfg);
  BOOST_TEST(!cfg->training.device.is_gpu()); // the default
  auto text = replace_first(synthetic_config, R"("batch_size": 16)",
                            R"("batch_size": 16, "device": "gpu:1")");
  cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(cfg->training.device.to_string() == "gpu:1");
}

BOOST_AUTO_TEST_CASE(threads_are_a_count_or_auto_which_splits_the_cores) {
  auto threads_of = [](const std::string& value) {
    auto cfg = parse_run_config(
      replace_first(synthetic_config, R"("batch_size": 16)",
                    R"("batch_size": 16, "threads": )" + value),
      "cfg.json");
    BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
    return cfg->training.threads;
  };
  auto cfg = parse_run_config(synthetic_config, "cfg.json");
  BOOST_REQUIRE(cfg);
  BOOST_TEST(cfg->training.threads == 0); // the default: auto
  BOOST_TEST(threads_of(R"("auto")") == 0);
  BOOST_TEST(threads_of("3") == 3);
  for (const char* bad : {R"("four")", R"("")", "0", "257", "1.5", "true"}) {
    auto text = replace_first(synthetic_config, R"("batch_size": 16)",
                              std::string{R"("batch_size": 16, "threads": )"}
                                + bad);
    BOOST_TEST(error_of(text).find("/training/threads") != std::string::npos,
               bad << " was accepted or not named");
  }
  BOOST_TEST(error_of(replace_first(synthetic_config, R"("batch_size": 16)",
                                    R"("batch_size": 16, "threads": "all")"))
               .find(R"(or "auto")")
             != std::string::npos);
  // auto: the hardware threads split among the process's workers.
  int cores = static_cast<int>(
    std::max(1u, std::thread::hardware_concurrency()));
  BOOST_TEST(compute_threads(0, 1) == cores);
  BOOST_TEST(compute_threads(0, 0) == cores); // no workers: the chief's eval
  BOOST_TEST(compute_threads(0, cores) == 1);
  BOOST_TEST(compute_threads(0, 4 * cores) == 1);
  BOOST_TEST(compute_threads(0, 2) == std::max(1, cores / 2));
  BOOST_TEST(compute_threads(5, 8) == 5); // a count is kept as it is
}

BOOST_AUTO_TEST_CASE(a_bad_device_names_the_path_and_the_value) {
  auto text = replace_first(synthetic_config, R"("batch_size": 16)",
                            R"("batch_size": 16, "device": "tpu:0")");
  BOOST_TEST(error_of(text)
             == "cfg.json: /training/device: expected \"cpu\", \"gpu\" or "
                "\"gpu:N\", found \"tpu:0\"");
  text = replace_first(synthetic_config, R"("batch_size": 16)",
                       R"("batch_size": 16, "device": 0)");
  BOOST_TEST(error_of(text).find("/training/device: expected a string")
             != std::string::npos);
  text = replace_first(synthetic_config, R"("training")", R"("cluster": {
    "nodes": [ { "name": "a", "port": 7000, "shards": 1 },
               { "name": "b", "port": 7001, "workers": 1, "device": "gpu:x" } ] },
  "training")");
  BOOST_TEST(error_of(text).find("/cluster/nodes/1/device: expected")
               != std::string::npos,
             error_of(text));
}

BOOST_AUTO_TEST_SUITE_END()
