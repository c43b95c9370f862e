// A dataset file replaced under a running cluster: the worker that next
// reads it names the file, and the run stops (exit 2, bad input) instead
// of training on other samples or dying of SIGBUS on a mapped file cut
// short. A restart would read the same file, so none is tried.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <functional>
#include <fstream>
#include <iterator>

#include "npy_files.hpp"
#include "running_cluster.hpp"
#include "runtime/data/click_data.hpp"

using namespace troupe::test;

namespace {

/// Starts `spec`'s cluster, lets it train, runs `change` and expects the
/// run to stop naming `file`; every member ends without a signal.
void expect_named_stop(const temp_dir& dir, cluster_spec spec,
                       const std::function<void()>& change,
                       const std::string& file) {
  running_cluster cluster{dir, spec};
  cluster.require_step(200);
  change();
  auto& chief = cluster.chief();
  BOOST_TEST(chief.wait(120) == 2, cluster.logs());
  auto said = chief.out() + chief.err();
  BOOST_TEST(has(said, file + ": this dataset file changed during the run"),
             said);
  BOOST_TEST(!has(said, "restarting it"), said);
  for (auto& m : cluster.members())
    BOOST_TEST(m->wait(30) >= 0, m->err()); // exited, not killed by a signal
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_changes)

BOOST_AUTO_TEST_CASE(an_npy_part_cut_short_during_a_run_is_named) {
  temp_dir dir;
  write_fashion_mnist_npy(dir.path(), 4);
  cluster_spec spec;
  spec.npy_dir = dir.path();
  spec.npy_train = "train_x-*.npy";
  spec.npy_train_labels = "train_y-*.npy";
  spec.epochs = 50;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  // The largest part (26250 samples) rewritten with half of its bytes:
  // its mapping now ends inside the file's old samples.
  auto part = dir.file("train_x-00003.npy");
  expect_named_stop(
    dir, spec,
    [&] {
      std::ifstream in{part, std::ios::binary};
      std::string bytes{std::istreambuf_iterator<char>(in), {}};
      write_file(part, bytes.substr(0, bytes.size() / 2));
    },
    part);
}

BOOST_AUTO_TEST_CASE(a_gzipped_click_log_part_rewritten_during_a_run_is_named) {
  temp_dir dir;
  troupe::click_generator_config gen;
  gen.schema = {2, 4, uint64_t{1} << 22};
  gen.train = 200000;
  gen.test = 5000;
  gen.values_per_field = 200;
  std::system(("mkdir -p " + dir.file("logs")).c_str());
  auto planted = troupe::generate_click_logs(gen, dir.file("all.tsv"),
                                             dir.file("logs/test.tsv"));
  BOOST_REQUIRE_MESSAGE(planted, why(planted));
  // Four parts of 50000 lines each.
  std::ifstream in{dir.file("all.tsv")};
  std::string parts[4], line;
  for (int i = 0; std::getline(in, line); ++i)
    parts[i / 50000] += line + "\n";
  for (int k = 0; k < 4; ++k)
    write_gz(dir.file("logs/train-" + std::to_string(k) + ".tsv.gz"), parts[k],
             1);
  cluster_spec spec;
  spec.click_dir = dir.file("logs");
  spec.click_train = "train-*.tsv.gz";
  spec.click_eval_every = 1000000;
  spec.epochs = 50;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  auto part = dir.file("logs/train-2.tsv.gz");
  expect_named_stop(
    dir, spec,
    [&] { write_gz(part, parts[2].substr(0, parts[2].size() / 2), 1); }, part);
}

BOOST_AUTO_TEST_SUITE_END()
