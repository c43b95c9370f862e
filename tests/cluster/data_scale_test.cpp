// A training set three times larger than the memory each worker node may
// use: Fashion-MNIST tiled 18 times (1,080,000 samples, 847 MB of .npy
// parts, none of it in the page cache), trained for one epoch by two worker
// nodes, each in a memory cgroup of 256 MiB (as a container's or a Slurm
// job's limit would hold it), in blocks of 4096 samples; worker node w1 is
// killed with kill -9 mid-epoch and its worker moves to w0. Every sample
// must be trained once, and no process killed for its memory. (Before the
// sets stayed in their files, troupe-train on Fashion-MNIST alone was
// killed, exit 137, under 256 MB.) Skipped where no cgroup v1 memory
// controller can be used (not root).
#include <boost/test/unit_test.hpp>

#include "memory_cgroup.hpp"
#include "npy_files.hpp"
#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

constexpr long long limit_bytes = 256LL << 20;
constexpr int tiles = 18;
constexpr long samples = 60000L * tiles;

} // namespace

BOOST_AUTO_TEST_SUITE(data_scale)

BOOST_AUTO_TEST_CASE(
  a_set_three_times_a_workers_memory_trains_every_sample_once) {
  memory_cgroup w0_limit{"troupe-w0", limit_bytes};
  memory_cgroup w1_limit{"troupe-w1", limit_bytes};
  if (!w0_limit.unusable().empty() || !w1_limit.unusable().empty()) {
    BOOST_TEST_MESSAGE("skipped: " << w0_limit.unusable());
    return;
  }
  temp_dir dir;
  write_tiled_fashion_mnist_npy(dir.path(), tiles);
  BOOST_TEST(60000.0 * 784 * tiles > 3.0 * limit_bytes);
  cluster_spec spec;
  spec.npy_dir = dir.path();
  spec.npy_train = "train_x-*.npy";
  spec.npy_train_labels = "train_y-*.npy";
  spec.shuffle_block = 4096;
  spec.epochs = 1;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 1}, {"w1", 0, 1}};
  spec.nodes[2].prefix = w0_limit.prefix();
  spec.nodes[3].prefix = w1_limit.prefix();
  running_cluster cluster{dir, spec};
  cluster.require_step(2000, 180);
  cluster.node("w1").kill9();
  auto& chief = cluster.chief();
  BOOST_REQUIRE_MESSAGE(chief.wait_for_output("worker 1 moves", 30),
                        cluster.logs());
  BOOST_REQUIRE_MESSAGE(chief.wait(400) == 0, cluster.logs());
  for (auto* name : {"ps0", "w0"})
    BOOST_TEST(cluster.node(name).wait(20) == 0, cluster.node(name).err());
  auto out = chief.out();
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{samples}), out);
  BOOST_TEST(has(out, "worker 1 moves from node w1 to node w0"), out);
  BOOST_TEST(w0_limit.oom_kills() == 0);
  BOOST_TEST(w1_limit.oom_kills() == 0);
  BOOST_TEST_MESSAGE("peak memory of w0's cgroup, page cache included: "
                     << w0_limit.peak_bytes() / (1 << 20) << " MiB of "
                     << limit_bytes / (1 << 20));
}

BOOST_AUTO_TEST_SUITE_END()
