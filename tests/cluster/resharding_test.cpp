// A checkpoint resumes on another number of shards, as an operator would
// do it: troupe-node processes on 127.0.0.1 train a sync run on 2 shard
// nodes to a checkpoint; the same checkpoint then resumes on 1, 2, 3 and
// 4 shards (other cluster files, other nodes), and every resume ends with
// bitwise the parameters of the resume on 2.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint.hpp"
#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

/// Shard nodes holding `shards` shards in all, and one worker node.
std::vector<node_spec> nodes_for(int shards) {
  std::vector<node_spec> nodes{{"chief"}};
  for (int i = 0; shards > 0; ++i) {
    int here = std::min(shards, 2);
    nodes.push_back({"ps" + std::to_string(i), here});
    shards -= here;
  }
  nodes.push_back({"w0", 0, 1});
  return nodes;
}

/// What a run left: the chief's output and the parameters of its last
/// checkpoint.
struct ended_run {
  std::string out;
  std::vector<float> params;
};

/// Runs `spec` in `dir` to its end at `step`; with `resume_from`, from a
/// copy of that folder's checkpoints (a resume writes checkpoints of its
/// own).
ended_run run_to(const temp_dir& dir, cluster_spec spec, int64_t step,
                 const temp_dir* resume_from = nullptr) {
  if (resume_from != nullptr) {
    std::string cp = "cp -r " + resume_from->file("ckpt") + " " + dir.path();
    BOOST_REQUIRE(std::system(cp.c_str()) == 0);
  }
  running_cluster cluster{dir, spec};
  cluster.require_finished();
  ended_run ended{cluster.chief().out(), {}};
  auto last = troupe::read_checkpoint(
    dir.file("ckpt/ckpt-" + std::to_string(step) + ".safetensors"));
  BOOST_REQUIRE_MESSAGE(last, why(last) + "\n" + ended.out);
  ended.params = std::move(last->params);
  return ended;
}

cluster_spec sync_run(int shards, int64_t max_steps) {
  cluster_spec spec;
  spec.mode = "sync";
  spec.epochs = 1;
  spec.max_steps = max_steps;
  spec.checkpoint_every = 100000; // a folder; files at the start and end
  spec.nodes = nodes_for(shards);
  return spec;
}

} // namespace

BOOST_AUTO_TEST_SUITE(resharding)

BOOST_AUTO_TEST_CASE(a_checkpoint_of_2_shards_resumes_on_1_3_and_4_bitwise) {
  temp_dir first;
  run_to(first, sync_run(2, 12), 12);
  std::vector<float> on_two;
  for (int shards : {2, 1, 3, 4}) {
    BOOST_TEST_CONTEXT(shards << " shards") {
      temp_dir dir;
      auto resumed = run_to(dir, sync_run(shards, 24), 24, &first);
      BOOST_TEST(has(resumed.out, "resuming from " + dir.file("ckpt/ckpt-12")),
                 resumed.out);
      BOOST_TEST(has(resumed.out, "the checkpoint was written on 2 shards")
                   == (shards != 2),
                 resumed.out);
      BOOST_TEST_MESSAGE(shards << " shards: " << resumed.params.size()
                                << " values");
      if (shards == 2)
        on_two = resumed.params;
      else
        BOOST_TEST(resumed.params == on_two); // bitwise
    }
  }
}

// The click model: its embedding table's rows go to the shard
// shard_of_row picks for this run's count, its dense layers are sliced as
// above, and a resume on 2 or 3 shards trains bitwise what a straight run
// on 2 does (a table started afresh at the resume would not).
BOOST_AUTO_TEST_CASE(a_click_models_tables_resume_on_3_shards_bitwise) {
  temp_dir first;
  make_click_logs(first, "logs", 20000, 2000);
  auto clicks = [&](int shards, int64_t max_steps) {
    auto spec = sync_run(shards, max_steps);
    spec.click_dir = first.file("logs");
    spec.click_eval_every = 100000;
    return spec;
  };
  std::vector<float> straight;
  {
    temp_dir dir;
    straight = run_to(dir, clicks(2, 24), 24).params;
  }
  run_to(first, clicks(2, 12), 12);
  for (int shards : {2, 3}) {
    BOOST_TEST_CONTEXT(shards << " shards") {
      temp_dir dir;
      auto resumed = run_to(dir, clicks(shards, 24), 24, &first);
      BOOST_TEST(has(resumed.out, "resuming from " + dir.file("ckpt/ckpt-12")),
                 resumed.out);
      BOOST_TEST(resumed.params == straight); // bitwise
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
