// troupe-train driven as a user drives it: a real process, real files,
// exit codes and the one-line errors on stderr.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <dirent.h>
#include <sstream>
#include <sys/stat.h>
#include <zlib.h>

#include "app_runner.hpp"
#include "train_runs.hpp"
#include "cuda_device.hpp"
#include "npy_files.hpp"
#include "runtime/config/config.hpp"

using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(troupe_train)

BOOST_AUTO_TEST_CASE(trains_a_synthetic_config) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("model: mlp 12-16-4 relu") != std::string::npos, o.out);
  BOOST_TEST(o.out.find("done: 26 steps (2 epochs)") != std::string::npos,
             o.out);
  BOOST_TEST(o.err.empty());
  // threads "auto" (the default): one worker, all of the cores.
  const int cores = troupe::compute_threads(0, 1);
  BOOST_TEST(o.out.find(", " + std::to_string(cores)
                        + (cores == 1 ? " thread)" : " threads)"))
               != std::string::npos,
             o.out);
}

// troupe's own CPU kernels are chosen at start (TROUPE_CPU_KERNELS, else
// the fastest the CPU runs) and named in the run's header; an unknown
// name stops the run at once, naming the variable.
BOOST_AUTO_TEST_CASE(the_cpu_kernels_are_chosen_at_start_and_named) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  ::setenv("TROUPE_CPU_KERNELS", "generic", 1);
  auto generic = run_train(tmp, "--config " + tmp.file("cfg.json"));
  ::setenv("TROUPE_CPU_KERNELS", "sse9", 1);
  auto unknown = run_train(tmp, "--config " + tmp.file("cfg.json"));
  ::unsetenv("TROUPE_CPU_KERNELS");
  auto chosen = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(generic.code == 0, generic.err);
  BOOST_TEST(generic.out.find("troupe generic kernels") != std::string::npos,
             generic.out);
  BOOST_TEST(unknown.code == 1);
  BOOST_TEST(unknown.err
             == "troupe-train: error: TROUPE_CPU_KERNELS=sse9: unknown; use "
                "auto, avx512, avx2 or generic\n");
  BOOST_TEST(unknown.out.find("step") == std::string::npos, unknown.out);
  BOOST_TEST(chosen.code == 0, chosen.err);
  BOOST_TEST(chosen.out.find(" kernels, direct conv") != std::string::npos,
             chosen.out);
}

// With a validation split the run watches the held-out samples and scores
// the test set once, at the end.
BOOST_AUTO_TEST_CASE(
  a_validation_split_is_watched_and_the_test_set_scored_last) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"),
                           replace_first(good, R"("test_samples": 100 })",
                                         R"("test_samples": 100,
                                   "validation_split": 0.25 })"));
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("data: 300 training, 100 validation, 100 test samples")
               != std::string::npos,
             o.out);
  // 300 samples in batches of 32: 10 steps an epoch.
  auto last = o.out.find("step 20, epoch 2.00: validation accuracy = ");
  BOOST_TEST(last != std::string::npos, o.out);
  BOOST_TEST(o.out.find("final: test accuracy = ", last) != std::string::npos,
             o.out);
  BOOST_TEST(o.out.find("done: 20 steps (2 epochs)") != std::string::npos,
             o.out);
  expect_bad(replace_first(good, R"("test_samples": 100 })",
                           R"("test_samples": 100, "validation_split": 1 })"),
             "/data/validation_split: expected a number >= 0 and <= 0.9, "
             "found 1");
}

// A model written as a list of layers trains; a list whose shapes do not
// fit the data stops at start with exit 2, naming the layer.
BOOST_AUTO_TEST_CASE(a_layer_list_trains_and_a_bad_one_names_its_layer) {
  temp_dir tmp;
  auto cfg = tmp.file("cfg.json");
  const std::string image_data =
    R"({ "format": "synthetic", "height": 8, "width": 8, "channels": 2,
           "classes": 4, "train_samples": 400, "test_samples": 100 })";
  auto model = R"("model": { "layers": [
      { "type": "conv2d", "filters": 4, "kernel": 3, "stride": 2,
        "activation": "relu" },
      { "type": "layernorm" }, { "type": "avgpool" }, { "type": "flatten" },
      { "type": "dropout", "rate": 0.1 },
      { "type": "dense", "units": 4 } ] },)";
  auto text = replace_first(
    good, R"("model": { "type": "mlp", "hidden": [16] },)", model);
  auto data_at = text.find(R"({ "format": "synthetic")");
  text.replace(data_at, text.find('}', data_at) + 1 - data_at, image_data);
  troupe::test::write_file(cfg, text);
  auto o = run_train(tmp, "--config " + cfg);
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("model: layers 8x8x2: conv 3x3/2 2->4 relu, "
                        "layernorm 4 eps 1e-05, avgpool 2x2, dropout 0.1, "
                        "dense 16->4 identity")
               != std::string::npos,
             o.out);
  BOOST_TEST(o.out.find("done: 26 steps (2 epochs)") != std::string::npos,
             o.out);

  auto pooled = text.replace(text.find(R"({ "type": "avgpool" })"), 21,
                             R"({ "type": "avgpool", "size": 8 })");
  troupe::test::write_file(cfg, pooled);
  o = run_train(tmp, "--config " + cfg);
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err
             == "troupe-train: error: /model/layers/2 (avgpool): a 8x8 pool "
                "is larger than its 4x4x4 input\n");
}

BOOST_AUTO_TEST_CASE(wrong_type) {
  expect_bad(
    replace_first(good, R"("batch_size": 32)", R"("batch_size": 3.5)"),
    "/training/batch_size: expected a positive integer <= 1048576, found 3.5");
}

BOOST_AUTO_TEST_CASE(missing_required_key) {
  expect_bad(
    replace_first(good, R"("model": { "type": "mlp", "hidden": [16] },)", ""),
    R"(/model: missing required key "model")");
}

BOOST_AUTO_TEST_CASE(unknown_key) {
  expect_bad(replace_first(good, R"("epochs": 2)",
                           R"("epochs": 2, "epoch": 3)"),
             R"(/training/epoch: unknown key "epoch")");
}

BOOST_AUTO_TEST_CASE(dataset_path_that_does_not_exist) {
  expect_bad(
    replace_first(good, R"({ "format": "synthetic", "width": 12, "classes": 4,
            "train_samples": 400, "test_samples": 100 })",
                  R"({ "format": "idx", "dir": "/nonexistent" })"),
    "/data/train_images: dataset file not found: "
    "/nonexistent/train-images-idx3-ubyte.gz");
}

BOOST_AUTO_TEST_CASE(config_file_and_flags) {
  temp_dir tmp;
  auto o = run_train(tmp, "--config /nonexistent.json");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(
    o.err == "troupe-train: error: /nonexistent.json: config file not found\n");
  o = run_train(tmp, "--config x --threads 0");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("--threads") != std::string::npos, o.err);
  o = run_train(tmp, "");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("--config is required") != std::string::npos, o.err);
}

// Relative paths in a config are read from its file's folder, whatever
// the working directory; a missing file is named by its full path.
BOOST_AUTO_TEST_CASE(relative_paths_start_at_the_config_files_folder) {
  temp_dir tmp;
  ::mkdir(tmp.file("byod").c_str(), 0755);
  ::mkdir(tmp.file("byod/data").c_str(), 0755);
  std::string table = "a,b,label\n";
  for (int i = 0; i < 64; ++i)
    table += std::to_string(i % 2) + "," + std::to_string(i % 3) + ","
             + std::to_string(i % 2) + "\n";
  troupe::test::write_file(tmp.file("byod/data/train.csv"), table);
  troupe::test::write_file(tmp.file("byod/data/test.csv"), table);
  const std::string config = R"({
  "model": { "type": "softmax" },
  "data": { "format": "csv", "dir": "data", "train": "train.csv",
            "test": "test.csv" },
  "training": { "batch_size": 16, "epochs": 1,
                "checkpoint": { "dir": "ckpt" } }
})";
  troupe::test::write_file(tmp.file("byod/npy.json"), config);
  // From the config's parent folder, as the user in the report ran it.
  auto o = troupe::test::run_app(tmp, "troupe-train", "--config byod/npy.json",
                                 120, tmp.path());
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("done: 4 steps") != std::string::npos, o.out);
  // The checkpoint folder is the config's too.
  struct stat st;
  BOOST_TEST(::stat(tmp.file("byod/ckpt/ckpt-4.safetensors").c_str(), &st)
             == 0);
  // A file that is not there: the error names the path tried, in full.
  auto missing = config;
  missing.replace(missing.find("test.csv"), 8, "gone.csv");
  troupe::test::write_file(tmp.file("byod/bad.json"), missing);
  o = troupe::test::run_app(tmp, "troupe-train", "--config byod/bad.json", 120,
                            tmp.path());
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("/data/test: dataset file not found: "
                        + tmp.file("byod/data/gone.csv"))
               != std::string::npos,
             o.err);
  // "base_dir" names another folder to start from.
  auto based = config;
  based.replace(based.find("\"model\""), 0,
                "\"base_dir\": \"" + tmp.file("byod") + "\", ");
  troupe::test::write_file(tmp.file("elsewhere.json"), based);
  o = run_train(tmp, "--config " + tmp.file("elsewhere.json")
                       + " --checkpoint-dir " + tmp.file("ckpt2"));
  BOOST_TEST(o.code == 0, o.err);
}

// The second run of a config resumes where the first stopped, as
// TensorFlow's MonitoredTrainingSession does; --fresh starts over and sets
// the earlier files aside; a changed setting is refused with the way out;
// the command line's overrides reach the run.
BOOST_AUTO_TEST_CASE(a_second_run_resumes_and_fresh_starts_over) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  auto ckpt = tmp.file("ckpt");
  auto first = run_train(tmp, "--config " + tmp.file("cfg.json")
                                + " --checkpoint-dir " + ckpt
                                + " --epochs 1 --name first");
  BOOST_REQUIRE_MESSAGE(first.code == 0, first.err);
  BOOST_TEST(first.out.find("run: first") != std::string::npos, first.out);
  BOOST_TEST(first.out.find("done: 13 steps (1 epochs)") != std::string::npos,
             first.out);
  // Again with one epoch more: it goes on from step 13.
  auto second = run_train(tmp, "--config " + tmp.file("cfg.json")
                                 + " --checkpoint-dir " + ckpt);
  BOOST_TEST(second.code == 0, second.err);
  BOOST_TEST(second.out.find("resume: step 13 from " + ckpt
                             + "/ckpt-13.safetensors")
               != std::string::npos,
             second.out);
  BOOST_TEST(second.out.find("done: 26 steps (2 epochs)") != std::string::npos,
             second.out);
  // Once more: nothing left, and it says so.
  auto third = run_train(tmp, "--config " + tmp.file("cfg.json")
                                + " --checkpoint-dir " + ckpt + " --resume");
  BOOST_TEST(third.code == 0, third.err);
  BOOST_TEST(third.out.find("the run had reached its last step (26)")
               != std::string::npos,
             third.out);
  // Another learning rate is another config: refused, naming the way out.
  auto other = run_train(tmp, "--config " + tmp.file("cfg.json")
                                + " --checkpoint-dir " + ckpt + " --lr 0.5");
  BOOST_TEST(other.code == 2);
  BOOST_TEST(other.err.find("/training/optimizer/learning_rate (checkpoint: "
                            "0.01, this run: 0.5)")
               != std::string::npos,
             other.err);
  BOOST_TEST(other.err.find("--fresh") != std::string::npos, other.err);
  // --fresh: from step 0, the earlier run's files moved aside, not lost.
  auto fresh = run_train(tmp, "--config " + tmp.file("cfg.json")
                                + " --checkpoint-dir " + ckpt
                                + " --lr 0.5 --fresh --batch-size 50");
  BOOST_TEST(fresh.code == 0, fresh.err);
  BOOST_TEST(fresh.out.find("starting over: the checkpoints of earlier runs "
                            "in "
                            + ckpt + " are set aside in " + ckpt
                            + "/set-aside-")
               != std::string::npos,
             fresh.out);
  BOOST_TEST(fresh.out.find("training: batch 50, 8 steps per epoch")
               != std::string::npos,
             fresh.out);
  BOOST_TEST(fresh.out.find("optimizer adam lr 0.5") != std::string::npos,
             fresh.out);
  int aside = 0;
  if (DIR* d = ::opendir(ckpt.c_str())) {
    while (auto* e = ::readdir(d))
      if (std::string{e->d_name}.rfind("set-aside-", 0) == 0) {
        ++aside;
        struct stat st;
        BOOST_TEST(
          ::stat((ckpt + "/" + e->d_name + "/ckpt-26.safetensors").c_str(), &st)
          == 0);
      }
    ::closedir(d);
  }
  BOOST_TEST(aside == 1);
  // Both flags, or either without a checkpoint folder: refused.
  auto both = run_train(tmp, "--config " + tmp.file("cfg.json")
                               + " --resume --fresh");
  BOOST_TEST(both.code == 2);
  auto none = run_train(tmp, "--config " + tmp.file("cfg.json") + " --fresh");
  BOOST_TEST(none.code == 2);
  BOOST_TEST(none.err
               == "troupe-train: error: --fresh: the run keeps no "
                  "checkpoints (give /training/checkpoint/dir or "
                  "--checkpoint-dir)\n",
             none.err);
}

// The operator's overrides refuse what cannot be meant, each naming its
// flag or key, before anything trains.
BOOST_AUTO_TEST_CASE(bad_overrides_are_named) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json")
                            + " --checkpoint-every 5");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err
               == "troupe-train: error: --checkpoint-every: the run keeps no "
                  "checkpoints (give /training/checkpoint/dir or "
                  "--checkpoint-dir)\n",
             o.err);
  o = run_train(tmp, "--config " + tmp.file("cfg.json") + " --lr -1");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err
               == "troupe-train: error: --lr: expected a number > 0, got "
                  "\"-1\" (see --help)\n",
             o.err);
  expect_bad(replace_first(good, "\"name\"", "\"base_dir\": \"\", \"name\""),
             "/base_dir: expected a folder, found \"\"");
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

BOOST_AUTO_TEST_SUITE_END()
