// What each process of a cluster holds of the dataset, as an operator sees
// it in /proc: Fashion-MNIST as .npy files (47 MB of training pixels as
// bytes, 188 MB as floats) stays in its files, mapped, where the worker
// node reads it a batch at a time; the chief, which has no workers, reads
// only the test set it scores; the shard node reads nothing; and no
// process of a run on the CPU maps a CUDA library. Gzipped IDX files are
// inflated once into a cache folder and mapped from there.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <sys/stat.h>
#include <thread>

#include "npy_files.hpp"
#include "proc_stats.hpp"
#include "running_cluster.hpp"

using namespace troupe::test;

namespace {

/// The training set's pixels as bytes: what a copy of them would add.
constexpr long train_pixel_kb = 60000L * 784 / 1024;

/// What /proc showed of a cluster's processes while it trained.
struct watched {
  std::vector<long> anon_kb;        ///< each process's peak, in order
  std::set<std::string> cuda_files; ///< CUDA libraries any process mapped
  std::set<std::string> mapped;     ///< files under `mapped_under` mapped
  std::string inspected;            ///< the shell's inspect worker:0
};

/// Samples every process every 100 ms until the chief ends (bounded: the
/// run takes seconds): its largest anonymous memory, the CUDA libraries it
/// maps (a CPU run should map none: a build with CUDA loads its GPU module
/// only for a worker on a GPU, and cuBLAS alone adds 67 MB of RSS), the
/// files under `mapped_under` it maps, and once past step 200 what
/// `inspect worker:0` says.
watched watch(running_cluster& cluster, const temp_dir& dir,
              const cluster_spec& spec, const std::string& mapped_under) {
  watched w;
  auto processes = cluster.processes();
  w.anon_kb.assign(processes.size(), 0);
  auto& chief = cluster.chief();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (!chief.ended() && std::chrono::steady_clock::now() < until) {
    for (size_t i = 0; i < processes.size(); ++i) {
      auto pid = processes[i]->pid();
      w.anon_kb[i] = std::max(w.anon_kb[i], rss_anon_kb(pid));
      for (const char* lib : {"libcuda", "libcublas", "libtroupe_cuda"})
        for (auto& file : mapped_files(pid, lib))
          w.cuda_files.insert(file);
      if (!mapped_under.empty())
        for (auto& file : mapped_files(pid, mapped_under))
          w.mapped.insert(file);
    }
    if (w.inspected.empty() && last_step(chief.out()) >= 200) {
      auto [code, text] = run_shell(dir, spec, "inspect worker:0");
      w.inspected = code == 0 ? text : "failed: " + text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return w;
}

/// A worker node and the chief hold less than half a copy of the
/// training pixels more than the shard node (the same program, which
/// reads no data), and no process maps a CUDA library.
void require_no_copies(const watched& w) {
  long base = w.anon_kb[1];
  long chief_kb = w.anon_kb[0], worker_kb = w.anon_kb[2];
  BOOST_TEST_MESSAGE("anonymous memory at its peak (KiB): chief "
                     << chief_kb << ", ps0 " << base << ", w0 " << worker_kb);
  BOOST_TEST(base > 0);
  std::string cuda;
  for (auto& file : w.cuda_files)
    cuda += " " + file;
  BOOST_TEST(w.cuda_files.empty(), "a CPU run mapped" << cuda);
  BOOST_TEST(worker_kb - base < train_pixel_kb / 2,
             "w0 holds " << worker_kb - base << " KiB more than ps0");
  BOOST_TEST(chief_kb - base < train_pixel_kb / 2,
             "the chief holds " << chief_kb - base << " KiB more than ps0");
}

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
  auto w = watch(cluster, dir, spec, "");
  cluster.require_finished();
  auto out = cluster.chief().out();
  BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000, 60000}), out);
  BOOST_TEST(has(out, "test accuracy"), out);
  // A worker node that copied the training set would hold 47 MB (bytes)
  // or 188 MB (floats) more than ps0; the chief, which scores the test
  // set, 7.8 MB of mapped bytes and no copy of the training set.
  require_no_copies(w);
  // What the worker read, as the shell shows it: each sample's 784 bytes
  // from the mapped file, and the time its steps spent on it.
  auto& inspected = w.inspected;
  BOOST_TEST_MESSAGE("inspect worker:0: " << inspected);
  auto j = nlohmann::json::parse(inspected, nullptr, false);
  BOOST_REQUIRE_MESSAGE(j.is_object(), inspected);
  BOOST_TEST(j["read_bytes"].get<long>() == j["samples"].get<long>() * 784,
             inspected);
  BOOST_TEST(j["read_seconds"].get<double>() > 0, inspected);
  BOOST_TEST(j["read_share"].get<double>() > 0, inspected);
  BOOST_TEST(j["read_share"].get<double>() < 1, inspected);
}

// Fashion-MNIST as Debian ships it, gzipped IDX files (31 MB stored):
// each node that reads the images inflates them once into its cache
// folder and maps the copy, so no process holds them in its own memory,
// and a second run uses the copies as they are.
BOOST_AUTO_TEST_CASE(gzipped_idx_files_are_inflated_once_and_mapped) {
  temp_dir dir;
  cluster_spec spec;
  spec.cache_dir = dir.file("cache");
  spec.epochs = 1;
  spec.nodes = {{"chief"}, {"ps0", 1}, {"w0", 0, 2}};
  struct stat before {};
  for (int run = 0; run < 2; ++run) {
    running_cluster cluster{dir, spec};
    auto w = watch(cluster, dir, spec, spec.cache_dir);
    cluster.require_finished();
    auto out = cluster.chief().out();
    BOOST_TEST(epoch_samples(out) == (std::vector<long>{60000}), out);
    require_no_copies(w);
    // The training images' copy (w0's) and the test images' (the
    // chief's), mapped; the labels are read into memory (60 KB).
    std::string mapped;
    for (auto& file : w.mapped)
      mapped += " " + file;
    BOOST_TEST(w.mapped.size() == 2u, mapped);
    BOOST_TEST(has(mapped, "/train-images-idx3-ubyte."), mapped);
    BOOST_TEST(has(mapped, "/t10k-images-idx3-ubyte."), mapped);
    auto train = std::find_if(w.mapped.begin(), w.mapped.end(),
                              [](const std::string& f) {
                                return has(f, "/train-images-idx3-ubyte.");
                              });
    struct stat st {};
    BOOST_REQUIRE(train != w.mapped.end());
    BOOST_REQUIRE(::stat(train->c_str(), &st) == 0);
    BOOST_TEST(st.st_size == 16 + 60000L * 784);
    if (run == 0)
      before = st;
    else // the same copy, not written again
      BOOST_TEST(st.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  }
}

BOOST_AUTO_TEST_SUITE_END()
