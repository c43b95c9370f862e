// What the click-model cases share: click logs drawn from a planted model
// (make_click_logs) and a spec that trains on them, and what they check of
// a run's output against that model: the test log-loss, near the planted
// model's and far below what the click rate alone scores.
#pragma once

#include <cmath>
#include <string>

#include <boost/test/unit_test.hpp>

#include "cluster_file.hpp"

namespace troupe::test {

/// A case's folder with click logs of 200,000 training and 20,000 test
/// samples in <dir>/logs, and a spec whose click model trains on them.
struct click_logs_case {
  temp_dir dir;
  troupe::planted_scores planted = make_click_logs(dir, "logs", 200000, 20000);
  cluster_spec spec;
  click_logs_case() { spec.click_dir = dir.file("logs"); }
};

/// The log-loss of predicting the test set's click rate for every sample:
/// what a model that learned nothing per sample scores.
inline double click_rate_entropy(const troupe::planted_scores& planted) {
  double q = planted.test_click_rate;
  return -(q * std::log(q) + (1 - q) * std::log(1 - q));
}

/// The run's last test log-loss in `out` is above 0 and below `within`
/// times the planted model's (1.05: within 5%); logged after `when`
/// ("after five moves").
inline void check_loss_near_planted(const std::string& out,
                                    const troupe::planted_scores& planted,
                                    double within, const std::string& when) {
  auto loss = last_value(out, "test loss = ");
  BOOST_TEST_MESSAGE("test log-loss " << when << ": " << loss << " (planted "
                                      << planted.test_log_loss << ")");
  BOOST_TEST(loss > 0, out);
  BOOST_TEST(loss < within * planted.test_log_loss, out);
}

} // namespace troupe::test
