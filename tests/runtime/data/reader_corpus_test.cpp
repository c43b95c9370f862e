// Replays the fuzz corpus of every file reader (tests/fuzz/corpus/<reader>/:
// the seeds and the reproducers of fixed findings) through the code the
// libFuzzer targets use (tests/fuzz/reader_inputs.cpp), in this gcc build
// without libFuzzer: each input must come back with a value or an error,
// never a crash, and a value must keep the readers' invariants. It also
// checks what the fuzzers leave alone: an error is one line that names the
// file (or the config's origin).
//
// TROUPE_READER_CORPUS=<dir> replays <dir>/<reader>/ (or
// <dir>/<reader>/corpus/, the layout of a scripts/fuzz.sh run) instead,
// e.g. the corpus a fuzzing run grew.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "corpus_files.hpp"
#include "fuzz/reader_inputs.hpp"

namespace fs = std::filesystem;
using namespace troupe::fuzz;
using namespace troupe::test;

namespace {

struct counts {
  size_t inputs = 0;
  size_t read = 0; ///< inputs the reader accepted
};

/// Reads every file of `reader`'s corpus.
counts replay(const std::string& reader) {
  auto it = std::find_if(readers().begin(), readers().end(),
                         [&](auto& r) { return r.name == reader; });
  BOOST_REQUIRE(it != readers().end());
  auto dir = corpus_dir(reader, "TROUPE_READER_CORPUS");
  auto files = corpus_files(dir);
  size_t failed = 0;
  for (auto& f : files) {
    auto bytes = file_bytes(f);
    auto o = it->read(reinterpret_cast<const uint8_t*>(bytes.data()),
                      bytes.size());
    BOOST_TEST(o.broken.empty(), f.filename() << ": " << o.broken);
    for (auto& e : o.errors) {
      BOOST_TEST(e.find('\n') == std::string::npos,
                 f.filename() << ": an error of several lines: " << e);
      BOOST_TEST(e.find(o.names) != std::string::npos,
                 f.filename()
                   << ": an error not naming " << o.names << ": " << e);
    }
    failed += o.errors.empty() ? 0 : 1;
  }
  BOOST_TEST_MESSAGE(reader << ": " << files.size() << " inputs from " << dir
                            << ", " << failed << " refused, "
                            << files.size() - failed << " read");
  return {files.size(), files.size() - failed};
}

/// Both outcomes are replayed: each corpus holds valid files too.
void replay_both(const std::string& reader) {
  auto n = replay(reader);
  BOOST_TEST(n.inputs > n.read);
  BOOST_TEST(n.read > 0u);
}

} // namespace

BOOST_AUTO_TEST_SUITE(reader_corpus)

BOOST_AUTO_TEST_CASE(config_files) {
  replay_both("config");
}

BOOST_AUTO_TEST_CASE(cluster_sections) {
  replay_both("cluster_file");
}

BOOST_AUTO_TEST_CASE(idx_files) {
  replay_both("idx");
}

BOOST_AUTO_TEST_CASE(cifar_files) {
  replay_both("cifar");
}

BOOST_AUTO_TEST_CASE(npy_files) {
  replay_both("npy");
}

BOOST_AUTO_TEST_CASE(npz_files) {
  replay_both("npz");
}

BOOST_AUTO_TEST_CASE(csv_files) {
  replay_both("csv");
}

BOOST_AUTO_TEST_CASE(click_logs) {
  replay_both("click_log");
}

BOOST_AUTO_TEST_CASE(table_files) {
  replay_both("table_file");
}

BOOST_AUTO_TEST_CASE(feeder_plans) {
  replay_both("feeder_plan");
}

BOOST_AUTO_TEST_CASE(safetensors_checkpoints) {
  replay_both("safetensors");
}

// Inputs too large for the fuzzers' -max_len, made here: many objects in
// one array or object. Each is refused (more than 1024 nodes, more than
// 4096 tensors), but only after parsing, which once cost N^2 (nlohmann's
// callback parser): an hour for a 16 MB checkpoint header.
BOOST_AUTO_TEST_CASE(many_objects_parse_in_linear_time) {
  std::string nodes = R"({"nodes": [)";
  for (int i = 0; i < 100000; ++i)
    nodes += (i > 0 ? "," : "") + std::string{R"({"name": "n)"}
             + std::to_string(i) + R"(", "port": 1})";
  nodes += "]}";
  std::string header = R"({"__metadata__": {"format": "troupe-checkpoint",)"
                       R"( "version": "1", "step": "1"})";
  for (int i = 0; i < 100000; ++i)
    header += R"(, "params/t)" + std::to_string(i)
              + R"(": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})";
  header += "}";
  std::string file(8, '\0');
  for (size_t i = 0; i < 8; ++i)
    file[i] = static_cast<char>(header.size() >> (8 * i));
  file += header + std::string(4, '\0');
  for (auto& [read, input] :
       {std::pair{read_cluster_file, &nodes}, {read_safetensors, &file}}) {
    auto start = std::chrono::steady_clock::now();
    auto o = read(reinterpret_cast<const uint8_t*>(input->data()),
                  input->size());
    std::chrono::duration<double> took = std::chrono::steady_clock::now()
                                         - start;
    BOOST_TEST(!o.errors.empty());
    BOOST_TEST_MESSAGE(input->size() << " bytes: " << took.count()
                                     << " s: " << o.errors.back());
    BOOST_TEST(took.count() < 10.0);
  }
}

BOOST_AUTO_TEST_SUITE_END()
