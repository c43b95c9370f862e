// troupe-train driven as a user drives it: a real process, real files,
// exit codes and the one-line errors on stderr.
#include <boost/test/unit_test.hpp>

#include "app_runner.hpp"
#include "cuda_device.hpp"
#include "runtime/config.hpp"

using troupe::test::temp_dir;

namespace {

using troupe::test::outcome;

outcome run_train(const temp_dir& tmp, const std::string& args) {
  return troupe::test::run_app(tmp, "troupe-train", args);
}

const char* good = R"({
  "name": "apps-test",
  "model": { "type": "mlp", "hidden": [16] },
  "data": { "format": "synthetic", "width": 12, "classes": 4,
            "train_samples": 400, "test_samples": 100 },
  "training": { "batch_size": 32, "epochs": 2,
                "optimizer": { "type": "adam", "learning_rate": 0.01 } }
})";

std::string with(const std::string& from, const std::string& to) {
  std::string text = good;
  auto pos = text.find(from);
  BOOST_REQUIRE(pos != std::string::npos);
  return text.replace(pos, from.size(), to);
}

// Writes `text` as a config, runs it, and expects exit 2 with exactly one
// stderr line equal to "troupe-train: error: <cfg>: <tail>".
void expect_bad(const std::string& text, const std::string& tail) {
  temp_dir tmp;
  auto cfg = tmp.file("cfg.json");
  troupe::test::write_file(cfg, text);
  auto o = run_train(tmp, "--config " + cfg);
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err == "troupe-train: error: " + cfg + ": " + tail + "\n");
}

} // namespace

BOOST_AUTO_TEST_SUITE(troupe_train)

BOOST_AUTO_TEST_CASE(trains_a_synthetic_config) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("model: mlp 12-16-4 relu") != std::string::npos, o.out);
  BOOST_TEST(o.out.find("done: 26 steps (2 epochs)") != std::string::npos, o.out);
  BOOST_TEST(o.err.empty());
  // threads "auto" (the default): one worker, all of the cores.
  const int cores = troupe::compute_threads(0, 1);
  BOOST_TEST(o.out.find(", " + std::to_string(cores)
                        + (cores == 1 ? " thread)" : " threads)"))
               != std::string::npos,
             o.out);
}

BOOST_AUTO_TEST_CASE(wrong_type) {
  expect_bad(with(R"("batch_size": 32)", R"("batch_size": 3.5)"),
             "/training/batch_size: expected a positive integer <= 1048576, found 3.5");
}

BOOST_AUTO_TEST_CASE(missing_required_key) {
  expect_bad(with(R"("model": { "type": "mlp", "hidden": [16] },)", ""),
             R"(/model: missing required key "model")");
}

BOOST_AUTO_TEST_CASE(unknown_key) {
  expect_bad(with(R"("epochs": 2)", R"("epochs": 2, "epoch": 3)"),
             R"(/training/epoch: unknown key "epoch")");
}

BOOST_AUTO_TEST_CASE(dataset_path_that_does_not_exist) {
  expect_bad(with(R"({ "format": "synthetic", "width": 12, "classes": 4,
            "train_samples": 400, "test_samples": 100 })",
                  R"({ "format": "idx", "dir": "/nonexistent" })"),
             "/data/train_images: dataset file not found: "
             "/nonexistent/train-images-idx3-ubyte.gz");
}

BOOST_AUTO_TEST_CASE(config_file_and_flags) {
  temp_dir tmp;
  auto o = run_train(tmp, "--config /nonexistent.json");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err
             == "troupe-train: error: /nonexistent.json: config file not found\n");
  o = run_train(tmp, "--config x --threads 0");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("--threads") != std::string::npos, o.err);
  o = run_train(tmp, "");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("--config is required") != std::string::npos, o.err);
}

// The real dataset through the real command: softmax regression, one epoch.
BOOST_AUTO_TEST_CASE(softmax_on_fashion_mnist) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), R"({
    "model": { "type": "softmax" },
    "data": { "format": "idx", "dir": "/usr/share/datasets/fashion-mnist" },
    "training": { "batch_size": 100, "epochs": 1, "log_every_steps": 200,
                  "optimizer": { "type": "sgd", "learning_rate": 0.1 } } })");
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 0, o.err);
  auto pos = o.out.find("done: 600 steps (1 epochs)");
  BOOST_REQUIRE_MESSAGE(pos != std::string::npos, o.out);
  auto acc = std::stod(o.out.substr(o.out.find("test accuracy = ", pos) + 16));
  BOOST_TEST(acc > 0.75, o.out);
}

BOOST_AUTO_TEST_CASE(a_gpu_that_is_not_there_is_an_error_at_start) {
  // No machine this runs on has 100 GPUs: the same holds with and without
  // CUDA, with and without a device; only the reason after "but" differs.
  temp_dir tmp;
  auto cfg = tmp.file("cfg.json");
  troupe::test::write_file(
    cfg, with(R"("batch_size": 32)", R"("batch_size": 32, "device": "gpu:99")"));
  auto o = run_train(tmp, "--config " + cfg);
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("troupe-train: error: " + cfg
                        + ": /training/device: gpu:99 was asked for, but ")
               == 0, o.err);
  BOOST_TEST(o.out.empty(), o.out); // nothing started
  troupe::test::write_file(cfg, good);
  o = run_train(tmp, "--config " + cfg + " --device gpu:99");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("troupe-train: error: --device: gpu:99 was asked "
                        "for, but ") == 0, o.err);
  o = run_train(tmp, "--config " + cfg + " --device tpu");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err == "troupe-train: error: --device: expected \"cpu\", "
                      "\"gpu\" or \"gpu:N\", found \"tpu\" (see --help)\n");
}

BOOST_AUTO_TEST_CASE(trains_on_the_gpu,
                     *boost::unit_test::precondition(
                       troupe::test::has_cuda_device)) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json")
                            + " --device gpu:0");
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("backend gpu:0 (") != std::string::npos, o.out);
  BOOST_TEST(o.out.find("done: 26 steps (2 epochs)") != std::string::npos,
             o.out);
}

BOOST_AUTO_TEST_SUITE_END()
