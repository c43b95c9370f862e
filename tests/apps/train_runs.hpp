// What the suite troupe_train's files share (troupe_train_test.cpp,
// troupe_train_data_test.cpp): troupe-train run in a folder, a small
// config that trains, and the one-line error a bad one gives.
#pragma once

#include <boost/test/unit_test.hpp>
#include <string>

#include "app_runner.hpp"

namespace troupe::test {

inline outcome run_train(const temp_dir& tmp, const std::string& args) {
  return run_app(tmp, "troupe-train", args);
}

inline const char* good = R"({
  "name": "apps-test",
  "model": { "type": "mlp", "hidden": [16] },
  "data": { "format": "synthetic", "width": 12, "classes": 4,
            "train_samples": 400, "test_samples": 100 },
  "training": { "batch_size": 32, "epochs": 2,
                "optimizer": { "type": "adam", "learning_rate": 0.01 } }
})";

/// Writes `text` as a config, runs it, and expects exit 2 with exactly one
/// stderr line equal to "troupe-train: error: <cfg>: <tail>".
inline void expect_bad(const std::string& text, const std::string& tail) {
  temp_dir tmp;
  auto cfg = tmp.file("cfg.json");
  write_file(cfg, text);
  auto o = run_train(tmp, "--config " + cfg);
  BOOST_TEST(o.code == 2);
  BOOST_TEST(o.err == "troupe-train: error: " + cfg + ": " + tail + "\n");
}

} // namespace troupe::test
