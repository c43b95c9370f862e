// GPU workers in a cluster of real processes on 127.0.0.1: two worker
// nodes sharing CUDA device 0 train the same sync run as CPU workers in
// one process and reach the same accuracy. Skipped without a device.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <memory>

#include "running_cluster.hpp"
#include "cuda_device.hpp"

using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(gpu_workers,
                      *boost::unit_test::precondition(has_cuda_device))

BOOST_AUTO_TEST_CASE(gpu_worker_nodes_reach_the_accuracy_of_cpu_workers) {
  temp_dir dir;
  cluster_spec spec;
  spec.mode = "sync"; // the same batches per update in both runs
  spec.nodes = {{"chief"},
                {"ps0", 1},
                {"ps1", 1},
                {"g0", 0, 1, 0, "gpu:0"},
                {"g1", 0, 1, 0, "gpu:0"}};
  running_cluster cluster{dir, spec};
  cluster.require_finished();
  auto& chief = cluster.chief();
  auto& g0 = cluster.node("g0");
  BOOST_TEST(g0.out().find("workers on gpu:0") != std::string::npos, g0.out());
  // The same run with CPU workers in one process.
  double gpu = test_accuracy(chief.out());
  double cpu = test_accuracy(run_in_one_process(dir, cluster.config(), 2, 2));
  BOOST_TEST_MESSAGE("test accuracy: GPU worker nodes "
                     << gpu << ", CPU workers in one process " << cpu);
  BOOST_TEST(gpu > 0.80);
  BOOST_TEST(std::abs(gpu - cpu) <= 0.01);
  BOOST_TEST(epoch_samples(chief.out()) == (std::vector<long>{60000, 60000}),
             chief.out());
}

BOOST_AUTO_TEST_CASE(gpu_workers_in_one_process_reach_the_accuracy_of_cpu) {
  temp_dir dir;
  cluster_spec spec;
  spec.mode = "sync";
  // Only the file's run matters here: its nodes are dropped.
  spec.nodes = {{"chief"}, {"w", 2, 2}};
  auto cluster = write_cluster(dir, spec);
  double on_cpu = test_accuracy(run_in_one_process(dir, cluster, 2, 2, "cpu"));
  double on_gpu = test_accuracy(
    run_in_one_process(dir, cluster, 2, 2, "gpu", {"--device", "gpu:0"}));
  BOOST_TEST_MESSAGE("test accuracy: GPU workers " << on_gpu << ", CPU workers "
                                                   << on_cpu);
  BOOST_REQUIRE(on_gpu >= 0);
  BOOST_REQUIRE(on_cpu >= 0);
  BOOST_TEST(std::abs(on_gpu - on_cpu) <= 0.01);
}

BOOST_AUTO_TEST_SUITE_END()
