// A dataset file replaced under a running cluster: the worker that next
// reads it names the file, and the run stops (exit 2, bad input) instead
// of training on other samples; a restart would read the same file, so
// none is tried. With data.on_file_change "skip" the run trains on without
// the file's samples. (The .npy files are replaced by a rename, as tools
// that write files safely do: one cut in place under the mapping could
// still end the node with SIGBUS between the check and the read.)
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <fstream>

#include "npy_files.hpp"
#include "running_cluster.hpp"

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

/// Replaces `path` with `text` as a safe writer does: a new file renamed
/// over it.
void replace_file(const std::string& path, const std::string& text) {
  write_file(path + ".new", text);
  BOOST_REQUIRE(std::rename((path + ".new").c_str(), path.c_str()) == 0);
}

/// Fashion-MNIST as 4 .npy parts in `dir` (part 3, the largest, holds
/// samples 33750..59999), trained by one worker node.
cluster_spec npy_parts_spec(const temp_dir& dir) {
  write_fashion_mnist_npy(dir.path(), 4);
  cluster_spec spec;
  spec.npy_dir = dir.path();
  spec.npy_train = "train_x-*.npy";
  spec.npy_train_labels = "train_y-*.npy";
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}};
  return spec;
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_changes)

BOOST_AUTO_TEST_CASE(an_npy_part_replaced_during_a_run_is_named) {
  temp_dir dir;
  auto spec = npy_parts_spec(dir);
  spec.epochs = 50;
  // The largest part (26250 samples) replaced by half of its bytes.
  auto part = dir.file("train_x-00003.npy");
  expect_named_stop(
    dir, spec,
    [&] {
      auto bytes = read_all(part);
      replace_file(part, bytes.substr(0, bytes.size() / 2));
    },
    part);
}

BOOST_AUTO_TEST_CASE(a_gzipped_click_log_part_rewritten_during_a_run_is_named) {
  temp_dir dir;
  make_click_logs(dir, "logs", 200000, 5000, "all.tsv");
  // Four parts of 50000 lines each.
  std::ifstream in{dir.file("logs/all.tsv")};
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

BOOST_AUTO_TEST_CASE(with_on_file_change_skip_the_run_trains_on_without_it) {
  temp_dir dir;
  auto spec = npy_parts_spec(dir);
  spec.on_file_change = "skip";
  spec.epochs = 3;
  running_cluster cluster{dir, spec};
  cluster.require_step(200);
  // Part 3 holds samples 33750..59999 (26250 of them).
  auto part = dir.file("train_x-00003.npy");
  replace_file(part, "cut");
  auto& chief = cluster.chief();
  cluster.require_finished(120, 30);
  auto out = chief.out();
  BOOST_TEST(has(out, "skipping " + part
                        + " (data.on_file_change \"skip\"): "
                          "worker 0: "
                        + part + ": this dataset file changed during the run"),
             out);
  BOOST_TEST(count_of(out, "skipping ") == 1u, out);
  // The epochs after the change train every other sample once; the one
  // it happened in, those trained before it too.
  auto epochs = epoch_samples(out);
  BOOST_REQUIRE_MESSAGE(epochs.size() == 3u, out);
  BOOST_TEST(epochs[0] >= 33750);
  BOOST_TEST(epochs[0] < 60000);
  BOOST_TEST(epochs[1] == 33750);
  BOOST_TEST(epochs[2] == 33750);
  BOOST_TEST(has(out, "test accuracy"), out);
}

BOOST_AUTO_TEST_SUITE_END()
