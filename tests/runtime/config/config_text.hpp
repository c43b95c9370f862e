// What the config reader's suites share (config_test.cpp and
// config_cluster_test.cpp, one suite "config"): a small valid config, and
// the error a text gives. (Edits of the text: replace_first, test_util.hpp.)
#pragma once

#include <boost/test/unit_test.hpp>
#include <string>

#include "runtime/base/errc.hpp"
#include "runtime/config/config.hpp"
#include "test_util.hpp"

namespace troupe::test {

inline const char* synthetic_config = R"({
  "name": "t",
  "model": { "type": "mlp", "hidden": [8] },
  "data": { "format": "synthetic", "width": 4, "classes": 3 },
  "training": { "batch_size": 16, "optimizer": { "type": "momentum",
                "learning_rate": 0.1, "momentum": 0.5,
                "schedule": { "type": "exponential", "decay_steps": 10,
                              "decay_rate": 0.5, "staircase": true } } }
})";

/// The error `text` gives, read as cfg.json.
inline std::string error_of(const std::string& text) {
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE(!cfg);
  return describe(cfg.error());
}

} // namespace troupe::test
