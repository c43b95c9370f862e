// The multi-process tests' cluster, started as a user starts one: the
// cluster file written from a cluster_spec, a troupe-node for every member,
// then the chief's. A test names what it does to which node
// (cluster.node("w1").kill9()) and gets every process's output when a
// check on the run fails.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "cluster_file.hpp"

namespace troupe::test {

class running_cluster {
public:
  /// Writes the cluster file of `spec` into `dir` (which fills in the
  /// spec's free ports) and starts the members, then the chief.
  running_cluster(const temp_dir& dir, cluster_spec& spec)
    : spec_(spec), config_(write_cluster(dir, spec)),
      members_(start_members(dir, config_, spec)),
      chief_(start_chief(dir, config_, spec)) {}

  /// The cluster file's path.
  const std::string& config() const { return config_; }

  process& chief() { return *chief_; }

  /// The member node `name` of the spec (the chief is chief()).
  process& node(const std::string& name) {
    for (size_t i = 1; i < spec_.nodes.size(); ++i)
      if (spec_.nodes[i].name == name)
        return *members_[i - 1];
    BOOST_FAIL("the cluster has no member node " + name);
    throw; // not reached: BOOST_FAIL throws
  }

  /// The member nodes in the spec's order.
  procs& members() { return members_; }

  /// Every process, the chief first.
  std::vector<const process*> processes() const {
    std::vector<const process*> out{chief_.get()};
    for (auto& m : members_)
      out.push_back(m.get());
    return out;
  }

  /// Every process's output, read when printed (see cluster_outputs).
  cluster_outputs logs() const { return {*chief_, members_}; }

  /// Ends the test, with every process's output, unless the chief logs
  /// step `step` within `seconds`.
  void require_step(long step, double seconds = 120) {
    BOOST_REQUIRE_MESSAGE(chief_->wait_for_step(step, seconds), logs());
  }

  /// Ends the test unless the chief finishes the run (exit code 0) within
  /// `seconds`; then every member must end with 0 within 20 s.
  void require_finished(double seconds = 240) {
    BOOST_REQUIRE_MESSAGE(chief_->wait(seconds) == 0, logs());
    for (auto& m : members_)
      BOOST_TEST(m->wait(20) == 0, m->err());
  }

private:
  const cluster_spec& spec_;
  std::string config_;
  procs members_;
  std::unique_ptr<process> chief_;
};

} // namespace troupe::test
