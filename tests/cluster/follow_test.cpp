// A folder of click logs that grows while a cluster of troupe-node
// processes trains on it (data.follow): each part is picked up as it
// appears (written under another name and renamed into place, as a log
// shipper does), scored before any of it is trained on, and trained once,
// in name order; a part that comes out of order is named and left out;
// the run ends once no part has come for a while. A chief killed with
// SIGKILL while parts still arrive is run again and takes the run over:
// still every sample of every part trained once.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "click_checks.hpp"
#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

constexpr int part_count = 8;
constexpr long part_lines = 25000;

/// Click logs in <dir>/logs: test.tsv, and the training lines cut into
/// `part_count` parts held back in <dir>/logs/held, to be let in.
struct growing_folder {
  temp_dir dir;
  troupe::planted_scores planted = make_click_logs(
    dir, "logs", part_count* part_lines, 5000);
  std::string parts[part_count];

  growing_folder() {
    std::ifstream in{dir.file("logs/train.tsv")};
    std::string line;
    for (long i = 0; std::getline(in, line); ++i)
      parts[i / part_lines] += line + "\n";
    std::filesystem::create_directories(dir.file("logs/parts"));
  }

  static std::string name(int k) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "train-%03d.tsv", k);
    return buf;
  }

  /// Part k appears in the folder whole: written aside, then renamed.
  void let_in(int k) {
    auto to = dir.file("logs/parts/" + name(k));
    write_file(to + ".partial", parts[k]);
    BOOST_REQUIRE(std::rename((to + ".partial").c_str(), to.c_str()) == 0);
  }

  cluster_spec spec() {
    cluster_spec s;
    s.click_dir = dir.file("logs");
    s.click_train = "parts/train-*.tsv";
    s.click_eval_every = 1000000;
    s.click_follow = {{"poll_seconds", 0.2}, {"stop_after_idle_seconds", 4}};
    s.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
    return s;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(follow)

BOOST_AUTO_TEST_CASE(a_followed_folder_trains_each_part_once_as_it_comes) {
  growing_folder logs;
  logs.let_in(0);
  logs.let_in(1);
  auto spec = logs.spec();
  running_cluster cluster{logs.dir, spec};
  auto& chief = cluster.chief();
  BOOST_REQUIRE_MESSAGE(chief.wait_for_output("part train-001.tsv", 60),
                        cluster.logs());
  // The shell shows the parts taken and the progressive score so far.
  auto [code, status] = run_shell(logs.dir, spec, "status");
  BOOST_TEST(code == 0, status);
  auto j = nlohmann::json::parse(status, nullptr, false);
  BOOST_REQUIRE_MESSAGE(j.is_object() && j["run"]["stream"].is_object(),
                        status);
  BOOST_TEST(j["run"]["stream"]["parts"].get<int>() >= 2, status);
  BOOST_TEST(j["run"]["stream"]["progressive_log_loss"].get<double>() > 0,
             status);
  for (int k = 2; k < part_count; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    logs.let_in(k);
    if (k == 4) { // late: sorts before parts known already
      write_file(logs.dir.file("logs/parts/train-0005.tsv"), logs.parts[0]);
    }
  }
  cluster.require_finished();
  auto out = chief.out();
  for (int k = 0; k < part_count; ++k)
    BOOST_TEST(count_of(out, "part " + growing_folder::name(k)
                               + ": progressive log-loss = ")
                 == 1u,
               out);
  BOOST_TEST(count_of(out, ": progressive log-loss = ")
               == static_cast<size_t>(part_count),
             out);
  BOOST_TEST(has(out, "train-0005.tsv came after"), out);
  BOOST_TEST(has(out, "no new part for 4 s; the run ends with the parts it "
                      "has (8)"),
             out);
  // Every sample of every part once, the last part's tail included.
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{part_count * part_lines}),
             out);
  auto steps = (part_count * part_lines + 255) / 256;
  BOOST_TEST(final_versions(out) == (std::vector<long>{steps}), out);
  // The model learned from the stream: the test set scores better than
  // the click rate alone.
  auto loss = last_value(out, "test loss = ");
  BOOST_TEST(loss > 0);
  BOOST_TEST(loss < click_rate_entropy(logs.planted), out);
}

BOOST_AUTO_TEST_CASE(a_followed_run_outlives_its_chief) {
  growing_folder logs;
  for (int k = 0; k < 3; ++k)
    logs.let_in(k);
  auto spec = logs.spec();
  spec.checkpoint_every = 100;
  running_cluster cluster{logs.dir, spec};
  auto& chief = cluster.chief();
  cluster.require_step(200);
  // More parts come before the kill: the chief run again finds a folder
  // that grew since its checkpoint, and still the same run.
  logs.let_in(3);
  logs.let_in(4);
  BOOST_REQUIRE_MESSAGE(chief.wait_for_output("part train-003.tsv", 60),
                        cluster.logs());
  chief.kill9();
  for (auto& m : cluster.members())
    BOOST_REQUIRE_MESSAGE(m->wait_for_output("s for a chief at 127.0.0.1:", 10),
                          m->out() + m->err());
  auto& again = cluster.run_chief_again();
  for (int k = 5; k < part_count; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    logs.let_in(k);
  }
  cluster.require_finished();
  auto out = again.out();
  BOOST_TEST(has(out, "kept the live shards"), out);
  BOOST_TEST(has(out, "are in the plan again"), out);
  // The parts that came after the kill were scored by the new chief.
  for (int k = 5; k < part_count; ++k)
    BOOST_TEST(has(out, "part " + growing_folder::name(k)
                          + ": progressive log-loss = "),
               out);
  // Not one sample trained twice or left out across the takeover.
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{part_count * part_lines}),
             out);
  auto steps = (part_count * part_lines + 255) / 256;
  BOOST_TEST(final_versions(out) == (std::vector<long>{steps}), out);
}

BOOST_AUTO_TEST_SUITE_END()
