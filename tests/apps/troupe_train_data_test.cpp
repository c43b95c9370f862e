// troupe-train on the data users bring (Fashion-MNIST as .npy, CSV tables,
// several binary labels), checkpoints scored and predicted from, and the
// GPU (the suite troupe_train, with troupe_train_test.cpp).
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

namespace {

double accuracy_after_done(const outcome& o) {
  auto pos = o.out.find("done: ");
  BOOST_REQUIRE_MESSAGE(pos != std::string::npos, o.out + o.err);
  return std::stod(o.out.substr(o.out.find("test accuracy = ", pos) + 16));
}

/// Writes `text` as the test set <tmp>/test.csv and runs <tmp>/cfg.json:
/// exit 2 and the one error line "troupe-train: error: <test.csv><tail>".
void expect_test_set_error(const temp_dir& tmp, const std::string& text,
                           const std::string& tail) {
  write_file(tmp.file("test.csv"), text);
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 2, o.err);
  BOOST_TEST(o.err
             == "troupe-train: error: " + tmp.file("test.csv") + tail + "\n");
}

} // namespace

// Fashion-MNIST's bytes as .npy files train exactly as the IDX files do:
// the same pixels scaled the same way, the same labels and classes.
BOOST_AUTO_TEST_CASE(fashion_mnist_as_npy_trains_as_idx_does) {
  temp_dir tmp;
  const auto& src = troupe::test::fashion_mnist_dir;
  troupe::test::write_fashion_mnist_npy(tmp.path());
  auto config = [&](const std::string& data) {
    return R"({ "model": { "type": "softmax" }, "data": )" + data + R"(,
      "training": { "batch_size": 100, "epochs": 1, "log_every_steps": 1000,
                    "optimizer": { "type": "sgd", "learning_rate": 0.1 } } })";
  };
  troupe::test::write_file(tmp.file("idx.json"),
                           config(R"({ "format": "idx", "dir": ")" + src
                                  + "\" }"));
  troupe::test::write_file(tmp.file("npy.json"),
                           config(R"({ "format": "npy", "dir": ")" + tmp.path()
                                  + R"(",
                "train": "train_x.npy", "train_labels": "train_y.npy",
                "test": "test_x.npy", "test_labels": "test_y.npy" })"));
  auto idx = run_train(tmp, "--config " + tmp.file("idx.json"));
  BOOST_TEST(idx.code == 0, idx.err);
  auto npy = run_train(tmp, "--config " + tmp.file("npy.json"));
  BOOST_TEST(npy.code == 0, npy.err);
  BOOST_TEST(accuracy_after_done(npy) == accuracy_after_done(idx), npy.out);
  BOOST_TEST(accuracy_after_done(npy) > 0.75);
  // The training set as 7 parts named by a glob: the same samples in the
  // same order, so the same run.
  ::mkdir(tmp.file("parts").c_str(), 0755);
  troupe::test::write_fashion_mnist_npy(tmp.file("parts"), 7);
  troupe::test::write_file(tmp.file("parts.json"),
                           config(R"({ "format": "npy", "dir": ")" + tmp.path()
                                  + R"(",
                "train": "parts/train_x-*.npy",
                "train_labels": "parts/train_y-*.npy",
                "test": "test_x.npy", "test_labels": "test_y.npy" })"));
  auto parts = run_train(tmp, "--config " + tmp.file("parts.json"));
  BOOST_TEST(parts.code == 0, parts.err);
  BOOST_TEST(parts.out.find("done: 600 steps (1 epochs)") != std::string::npos,
             parts.out);
  BOOST_TEST(accuracy_after_done(parts) == accuracy_after_done(idx), parts.out);
  // Shuffled in blocks of 4096 samples: another order, every sample once,
  // and it learns as well.
  auto text = troupe::test::slurp(tmp.file("parts.json"));
  text.replace(text.find("\"epochs\": 1"), 11,
               "\"epochs\": 1, \"shuffle_block\": 4096");
  troupe::test::write_file(tmp.file("blocks.json"), text);
  auto blocks = run_train(tmp, "--config " + tmp.file("blocks.json"));
  BOOST_TEST(blocks.code == 0, blocks.err);
  BOOST_TEST(blocks.out.find("done: 600 steps (1 epochs)") != std::string::npos,
             blocks.out);
  BOOST_TEST(accuracy_after_done(blocks) != accuracy_after_done(parts),
             blocks.out);
  BOOST_TEST(accuracy_after_done(blocks) > 0.75, blocks.out);
}

// A CSV table with the label in its own named column, classes 1..3 (so 4
// from the data), trains to a clear separation; a bad row stops the run
// with the file and the line, exit 2.
BOOST_AUTO_TEST_CASE(a_csv_table_trains_and_a_bad_row_is_named) {
  temp_dir tmp;
  auto table = [](int rows, uint32_t seed) {
    std::string s = "f0,f1,kind,f2\n";
    for (int i = 0; i < rows; ++i) {
      int c = 1 + i % 3;
      seed = seed * 1664525u + 1013904223u;
      double noise = (seed >> 8) / double(1 << 24) - 0.5;
      s += std::to_string(c == 1 ? 1 + noise : noise) + ","
           + std::to_string(c == 2 ? 1 - noise : -noise) + ","
           + std::to_string(c) + ","
           + std::to_string(c == 3 ? 1 + noise : 0.5 * noise) + "\n";
    }
    return s;
  };
  troupe::test::write_file(tmp.file("train.csv"), table(600, 1));
  troupe::test::write_file(tmp.file("test.csv"), table(150, 2));
  troupe::test::write_file(tmp.file("cfg.json"), R"({
    "model": { "type": "mlp", "hidden": [16] },
    "data": { "format": "csv", "dir": ")" + tmp.path()
                                                   + R"(",
              "train": "train.csv", "test": "test.csv",
              "label_column": "kind" },
    "training": { "batch_size": 20, "epochs": 5,
                  "optimizer": { "type": "adam", "learning_rate": 0.02 } } })");
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(accuracy_after_done(o) > 0.95, o.out);
  expect_test_set_error(tmp, "f0,f1,kind,f2\n0,0,1,0\n0,zero,2,0\n",
                        ":3: column \"f1\": \"zero\" is not a number");
}

// Several labels per sample (binary cross-entropy on two CSV columns):
// scored by subset accuracy, every label of a sample right; a target
// outside [0, 1] is named with its row.
BOOST_AUTO_TEST_CASE(a_multi_label_csv_trains_with_binary_cross_entropy) {
  temp_dir tmp;
  auto table = [](int rows, uint32_t seed) {
    std::string s = "f0,wet,f1,f2,cold\n";
    for (int i = 0; i < rows; ++i) {
      double f[3];
      for (auto& v : f) {
        seed = seed * 1664525u + 1013904223u;
        v = 2 * ((seed >> 8) / double(1 << 24) - 0.5);
      }
      s += std::to_string(f[0]) + "," + (f[0] > 0 ? "1" : "0") + ","
           + std::to_string(f[1]) + "," + std::to_string(f[2]) + ","
           + (f[1] + f[2] > 0 ? "1" : "0") + "\n";
    }
    return s;
  };
  troupe::test::write_file(tmp.file("train.csv"), table(1000, 1));
  troupe::test::write_file(tmp.file("test.csv"), table(200, 2));
  auto config = [&](int units, const std::string& checkpoint) {
    troupe::test::write_file(tmp.file("cfg.json"), R"({
      "model": { "layers": [ { "type": "dense", "units": )"
                                                     + std::to_string(units)
                                                     + R"( } ],
                 "loss": "binary_cross_entropy" },
      "data": { "format": "csv", "dir": ")" + tmp.path()
                                                     + R"(",
                "train": "train.csv", "test": "test.csv",
                "label_column": ["wet", "cold"] },
      "training": { "batch_size": 20, "epochs": 10, )"
                                                     + checkpoint + R"(
                    "optimizer": { "type": "adam",
                                   "learning_rate": 0.05 } } })");
  };
  config(2, R"("checkpoint": { "dir": ")" + tmp.file("ckpt") + R"(" },)");
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("model: layers 3: dense 3->2 identity")
               != std::string::npos,
             o.out);
  BOOST_TEST(accuracy_after_done(o) > 0.9, o.out);
  // troupe-predict gives each label and its probability.
  troupe::test::write_file(tmp.file("new.csv"),
                           "f0,f1,f2\n0.9,0.9,0.9\n-0.9,-0.9,-0.9\n");
  auto p = troupe::test::run_app(
    tmp, "troupe-predict",
    "--checkpoint " + tmp.file("ckpt/ckpt-500.safetensors") + " --input "
      + tmp.file("new.csv") + " --output " + tmp.file("out.csv"));
  BOOST_TEST(p.code == 0, p.err);
  auto predicted = troupe::test::slurp(tmp.file("out.csv"));
  BOOST_TEST(predicted.find("label0,label1,p0,p1\n1,1,0.") == 0, predicted);
  BOOST_TEST(predicted.find("\n0,0,0.") != std::string::npos, predicted);
  // A table that still has the label columns the run trained on: left
  // out, and said so.
  p = troupe::test::run_app(
    tmp, "troupe-predict",
    "--checkpoint " + tmp.file("ckpt/ckpt-500.safetensors") + " --input "
      + tmp.file("test.csv") + " --output " + tmp.file("out.npy"));
  BOOST_TEST(p.code == 0, p.err);
  BOOST_TEST(p.out.find("leaving out wet, cold (the model was trained to "
                        "predict them)\n")
               == 0,
             p.out);
  // --evaluate scores it as the run did, with no per-class table.
  auto e = run_train(tmp, "--config " + tmp.file("cfg.json") + " --evaluate "
                            + tmp.file("ckpt/ckpt-500.safetensors"));
  BOOST_TEST(e.code == 0, e.err);
  auto last = o.out.find("step 500, epoch 10.00: ");
  BOOST_REQUIRE_MESSAGE(last != std::string::npos, o.out);
  auto scored = o.out.substr(last + 23, o.out.find(" (", last) - last - 23);
  BOOST_TEST(e.out.find("\n" + scored + "\n") != std::string::npos,
             e.out + " <- " + scored);
  BOOST_TEST(e.out.find("confusion") == std::string::npos, e.out);

  config(2, "");
  expect_test_set_error(tmp, "f0,wet,f1,f2,cold\n0,1,0,0,0\n0,1,0,0,2\n",
                        ":3: column \"cold\": target 2; binary cross-entropy "
                        "needs targets in [0, 1]");
  // A last layer of another width than the targets is named.
  config(3, "");
  troupe::test::write_file(tmp.file("test.csv"), table(10, 3));
  o = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_TEST(o.code == 2, o.err);
  BOOST_TEST(o.err.find("/model/layers/0: the last layer gives 3 "
                        "values per sample; the data has 2 targets per "
                        "sample: end with a dense layer of 2 units")
               != std::string::npos,
             o.err);
}

// --evaluate scores a checkpoint as the run that wrote it did, adds each
// class's accuracy and the confusion matrix, and writes nothing;
// troupe-predict, given the checkpoint alone, predicts what it scored.
BOOST_AUTO_TEST_CASE(evaluate_and_predict_with_a_checkpoint) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), R"({
    "model": { "type": "softmax" },
    "data": { "format": "idx", "dir": "/usr/share/datasets/fashion-mnist" },
    "training": { "batch_size": 100, "epochs": 1, "log_every_steps": 1000,
                  "optimizer": { "type": "sgd", "learning_rate": 0.1 },
                  "checkpoint": { "dir": ")" + tmp.file("ckpt")
                                                   + R"(" } } })");
  auto trained = run_train(tmp, "--config " + tmp.file("cfg.json"));
  BOOST_REQUIRE_MESSAGE(trained.code == 0, trained.err);
  auto ckpt = tmp.file("ckpt/ckpt-600.safetensors");
  struct stat before {};
  BOOST_REQUIRE(stat(ckpt.c_str(), &before) == 0);
  auto o = run_train(tmp, "--config " + tmp.file("cfg.json") + " --evaluate "
                            + ckpt);
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("evaluate: " + ckpt
                        + " (step 600, softmax 784-10) "
                          "on 10000 test samples")
               == 0,
             o.out);
  // The accuracy the run reported at its end.
  auto acc = accuracy_after_done(trained);
  auto line = o.out.find("test accuracy = ");
  BOOST_REQUIRE(line != std::string::npos);
  BOOST_TEST(std::stod(o.out.substr(line + 16)) == acc, o.out);
  // The confusion matrix: ten rows of ten counts, each row 1000 (the
  // test set's samples per class), the diagonal as accurate as reported.
  auto at = o.out.find("confusion (rows: label, columns: predicted)\n");
  BOOST_REQUIRE(at != std::string::npos);
  std::istringstream rows{
    o.out.substr(o.out.find('\n', o.out.find('\n', at) + 1) + 1)};
  int64_t total = 0, diagonal = 0;
  for (int label = 0; label < 10; ++label) {
    int row_label = -1;
    rows >> row_label;
    BOOST_TEST(row_label == label);
    int64_t sum = 0;
    for (int c = 0; c < 10; ++c) {
      int64_t v = -1;
      rows >> v;
      BOOST_TEST(v >= 0);
      sum += v;
      if (c == label)
        diagonal += v;
    }
    BOOST_TEST(sum == 1000);
    total += sum;
  }
  BOOST_TEST(total == 10000);
  BOOST_TEST(static_cast<double>(diagonal) / 10000.0 == acc,
             boost::test_tools::tolerance(1e-9));
  // Nothing was written: the checkpoint folder holds the one file as it was.
  struct stat after {};
  BOOST_REQUIRE(stat(ckpt.c_str(), &after) == 0);
  BOOST_TEST(after.st_mtime == before.st_mtime);
  BOOST_TEST(after.st_size == before.st_size);
  BOOST_TEST(troupe::test::files_in(tmp.file("ckpt")).size() == 1u);

  // The NumPy example of docs/checkpoints.md scores the checkpoint the
  // same way (python3-numpy; skipped without it).
  if (!troupe::test::python_has("numpy")) {
    BOOST_TEST_MESSAGE("python3-numpy is not installed: the docs' NumPy "
                       "example is not run");
  } else {
    auto page = troupe::test::slurp(std::string{TROUPE_SOURCE_DIR}
                                    + "/docs/checkpoints.md");
    auto marker = page.find("<!-- numpy-example -->\n```python\n");
    BOOST_REQUIRE(marker != std::string::npos);
    auto begin = page.find('\n', page.find("```python", marker)) + 1;
    auto end = page.find("```", begin);
    troupe::test::write_file(tmp.file("example.py"),
                             page.substr(begin, end - begin));
    auto cmd = troupe::test::python() + " " + tmp.file("example.py") + " "
               + ckpt + " >" + tmp.file("example.out") + " 2>&1";
    BOOST_TEST(std::system(cmd.c_str()) == 0);
    auto printed = troupe::test::slurp(tmp.file("example.out"));
    auto mine = o.out.substr(line, o.out.find(',', line) - line);
    BOOST_TEST(printed == mine + "\n", printed);
  }

  // troupe-predict with the checkpoint alone: the test images as .npy,
  // predictions as CSV whose labels score the accuracy --evaluate gave,
  // each row's probabilities summing to 1; and as .npy.
  const std::string src = "/usr/share/datasets/fashion-mnist/";
  write_u1_npy(tmp.file("test_x.npy"), "(10000, 28, 28)",
               idx_payload(src + "t10k-images-idx3-ubyte.gz", 16));
  auto truth = idx_payload(src + "t10k-labels-idx1-ubyte.gz", 8);
  auto predict = [&](const std::string& args) {
    return troupe::test::run_app(tmp, "troupe-predict",
                                 "--checkpoint " + ckpt + " " + args);
  };
  auto p = predict("--input " + tmp.file("test_x.npy") + " --output "
                   + tmp.file("pred.csv"));
  BOOST_TEST(p.code == 0, p.err);
  std::istringstream csv{troupe::test::slurp(tmp.file("pred.csv"))};
  std::string row;
  std::getline(csv, row);
  BOOST_TEST(row == "label,p0,p1,p2,p3,p4,p5,p6,p7,p8,p9");
  int64_t predicted = 0, hits = 0;
  double worst = 0;
  while (std::getline(csv, row)) {
    std::istringstream fields{row};
    std::string f;
    std::getline(fields, f, ',');
    int label = std::stoi(f);
    double sum = 0;
    while (std::getline(fields, f, ','))
      sum += std::stod(f);
    worst = std::max(worst, std::abs(sum - 1));
    hits += label == truth[static_cast<size_t>(predicted)] ? 1 : 0;
    ++predicted;
  }
  BOOST_TEST(predicted == 10000);
  BOOST_TEST(static_cast<double>(hits) / 10000.0 == acc,
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(worst < 1e-4);
  p = predict("--input " + tmp.file("test_x.npy") + " --output "
              + tmp.file("pred.npy"));
  BOOST_TEST(p.code == 0, p.err);
  struct stat probs {
  }, labels{};
  BOOST_TEST(stat(tmp.file("pred.npy").c_str(), &probs) == 0);
  BOOST_TEST(stat(tmp.file("pred.labels.npy").c_str(), &labels) == 0);
  BOOST_TEST(probs.st_size == 128 + 10000 * 10 * 4);
  BOOST_TEST(labels.st_size == 128 + 10000 * 4);
  // Samples that do not fit the model, an output of another kind.
  troupe::test::write_file(tmp.file("narrow.csv"), "a,b,c\n1,2,3\n");
  p = predict("--input " + tmp.file("narrow.csv") + " --output "
              + tmp.file("p.csv"));
  BOOST_TEST(p.code == 2);
  BOOST_TEST(p.err.find("(samples of 1x3x1 do not fit the model it holds, "
                        "softmax)\n")
               != std::string::npos,
             p.err);
  p = predict("--input " + tmp.file("test_x.npy") + " --output "
              + tmp.file("p.txt"));
  BOOST_TEST(p.code == 2);
  BOOST_TEST(p.err
             == "troupe-predict: error: --output: " + tmp.file("p.txt")
                  + ": expected a .csv or .npy file name\n");

  // Bad input: exit 2 with one line naming what is wrong.
  o = run_train(tmp, "--config " + tmp.file("cfg.json") + " --evaluate "
                       + tmp.file("none.safetensors"));
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err
             == "troupe-train: error: " + tmp.file("none.safetensors")
                  + ": no such file\n");
  troupe::test::write_file(tmp.file("mlp.json"), R"({
    "model": { "type": "mlp", "hidden": [8] },
    "data": { "format": "idx", "dir": "/usr/share/datasets/fashion-mnist" },
    "training": { "batch_size": 100, "epochs": 1,
                  "optimizer": { "type": "sgd", "learning_rate": 0.1 } } })");
  o = run_train(tmp,
                "--config " + tmp.file("mlp.json") + " --evaluate " + ckpt);
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("troupe-train: error: " + ckpt) == 0, o.err);
}

BOOST_AUTO_TEST_CASE(a_gpu_that_is_not_there_is_an_error_at_start) {
  // No machine this runs on has 100 GPUs: the same holds with and without
  // CUDA, with and without a device; only the reason after "but" differs.
  temp_dir tmp;
  auto cfg = tmp.file("cfg.json");
  troupe::test::write_file(
    cfg, replace_first(good, R"("batch_size": 32)",
                       R"("batch_size": 32, "device": "gpu:99")"));
  auto o = run_train(tmp, "--config " + cfg);
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("troupe-train: error: " + cfg
                        + ": /training/device: gpu:99 was asked for, but ")
               == 0,
             o.err);
  BOOST_TEST(o.out.empty(), o.out); // nothing started
  troupe::test::write_file(cfg, good);
  o = run_train(tmp, "--config " + cfg + " --device gpu:99");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err.find("troupe-train: error: --device: gpu:99 was asked "
                        "for, but ")
               == 0,
             o.err);
  o = run_train(tmp, "--config " + cfg + " --device tpu");
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err
             == "troupe-train: error: --device: expected \"cpu\", "
                "\"gpu\" or \"gpu:N\", found \"tpu\" (see --help)\n");
}

BOOST_AUTO_TEST_CASE(a_gpu_module_that_is_missing_or_broken_is_named) {
  // The GPU backend is a module opened when a GPU is asked for; one that
  // is not where TROUPE_CUDA_MODULE says, or is no shared object, is an
  // error at start that names the file.
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  troupe::test::write_file(tmp.file("junk.so"), "not an ELF file\n");
  for (std::string file : {"none.so", "junk.so"}) {
    ::setenv("TROUPE_CUDA_MODULE", tmp.file(file).c_str(), 1);
    auto o = run_train(tmp,
                       "--config " + tmp.file("cfg.json") + " --device gpu:0");
    ::unsetenv("TROUPE_CUDA_MODULE");
    BOOST_TEST(o.code == 2, o.err);
    std::string reason;
    if (!TROUPE_HAVE_CUDA)
      reason = "this troupe was built without CUDA";
    else if (file == "none.so")
      reason = "troupe's GPU module is not at " + tmp.file(file)
               + " (set TROUPE_CUDA_MODULE to its path)";
    else
      reason = "troupe's GPU module cannot be loaded: " + tmp.file(file);
    BOOST_TEST(o.err.find("troupe-train: error: --device: gpu:0 was asked "
                          "for, but "
                          + reason)
                 == 0,
               o.err);
  }
}

BOOST_AUTO_TEST_CASE(trains_on_the_gpu, *boost::unit_test::precondition(
                                          troupe::test::has_cuda_device)) {
  temp_dir tmp;
  troupe::test::write_file(tmp.file("cfg.json"), good);
  auto o = run_train(tmp,
                     "--config " + tmp.file("cfg.json") + " --device gpu:0");
  BOOST_TEST(o.code == 0, o.err);
  BOOST_TEST(o.out.find("backend gpu:0 (") != std::string::npos, o.out);
  BOOST_TEST(o.out.find("done: 26 steps (2 epochs)") != std::string::npos,
             o.out);
}

BOOST_AUTO_TEST_SUITE_END()
