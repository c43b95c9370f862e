// What each process of a cluster holds of the dataset, as an operator sees
// it in /proc: Fashion-MNIST as .npy files (47 MB of training pixels as
// bytes, 188 MB as floats) stays in its files, mapped, where the worker
// node reads it a batch at a time; the chief, which has no workers, reads
// only the test set it scores; the shard node reads nothing; and no
// process of a run on the CPU maps a CUDA library.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "npy_files.hpp"
#include "proc_stats.hpp"
#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

/// The training set's pixels as bytes: what a copy of them would add.
constexpr long train_pixel_kb = 60000L * 784 / 1024;

} // namespace

BOOST_AUTO_TEST_SUITE(data_memory)

BOOST_AUTO_TEST_CASE(
  each_node_holds_only_what_it_reads_and_the_files_stay_mapped) {
  temp_dir dir;
  write_fashion_mnist_npy(dir.path());
  cluster_spec spec;
  spec.npy_dir = dir.path();
  spec.epochs = 2;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 2}};
  running_cluster cluster{dir, spec};
  // The largest anonymous memory of each process while the run trains,
  // sampled every 100 ms (bounded: the run takes seconds).
  struct peak {
    const process* p;
    long anon_kb = 0;
  };
  std::vector<peak> peaks;
  for (auto* p : cluster.processes())
    peaks.push_back({p});
  auto& chief = cluster.chief();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  std::string inspected;
  // CUDA's libraries, which no process of a CPU run should map (cuBLAS
  // alone adds 67 MB of RSS): a build with CUDA loads its GPU module only
  // for a worker on a GPU.
  std::set<std::string> cuda_files;
  while (!chief.ended() && std::chrono::steady_clock::now() < until) {
    for (auto& pk : peaks) {
      pk.anon_kb = std::max(pk.anon_kb, rss_anon_kb(pk.p->pid()));
      for (const char* lib : {"libcuda", "libcublas", "libtroupe_cuda"})
        for (auto& file : mapped_files(pk.p->pid(), lib))
          cuda_files.insert(file);
    }
    if (inspected.empty() && last_step(chief.out()) >= 200) {
      auto [code, text] = run_shell(dir, spec, "inspect worker:0");
      inspected = code == 0 ? text : "failed: " + text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  cluster.require_finished();
  auto out = chief.out();
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
  BOOST_TEST(has(out, "test accuracy"), out);
  // The shard node's memory is the baseline: the same program, which
  // reads no data. A worker node that copied the training set would hold
  // 47 MB (bytes) or 188 MB (floats) more; the chief, which scores the
  // test set, 7.8 MB of mapped bytes and no copy of the training set.
  long base = peaks[1].anon_kb;
  long chief_kb = peaks[0].anon_kb, worker_kb = peaks[2].anon_kb;
  BOOST_TEST_MESSAGE("anonymous memory at its peak (KiB): chief "
                     << chief_kb << ", ps0 " << base << ", w0 " << worker_kb);
  BOOST_TEST(base > 0);
  std::string mapped;
  for (auto& file : cuda_files)
    mapped += " " + file;
  BOOST_TEST(cuda_files.empty(), "a CPU run mapped" << mapped);
  BOOST_TEST(worker_kb - base < train_pixel_kb / 2,
             "w0 holds " << worker_kb - base << " KiB more than ps0");
  BOOST_TEST(chief_kb - base < train_pixel_kb / 2,
             "the chief holds " << chief_kb - base << " KiB more than ps0");
  // What the worker read, as the shell shows it: each sample's 784 bytes
  // from the mapped file, and the time its steps spent on it.
  BOOST_TEST_MESSAGE("inspect worker:0: " << inspected);
  auto j = nlohmann::json::parse(inspected, nullptr, false);
  BOOST_REQUIRE_MESSAGE(j.is_object(), inspected);
  BOOST_TEST(j["read_bytes"].get<long>() == j["samples"].get<long>() * 784,
             inspected);
  BOOST_TEST(j["read_seconds"].get<double>() > 0, inspected);
  BOOST_TEST(j["read_share"].get<double>() > 0, inspected);
  BOOST_TEST(j["read_share"].get<double>() < 1, inspected);
}

BOOST_AUTO_TEST_SUITE_END()
