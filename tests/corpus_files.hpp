// What the replays of the fuzz corpora share (actors/fuzz_corpus_test,
// runtime/data/reader_corpus_test, models/layer_list_test): where a fuzz
// target's corpus is, its files in order, and their bytes.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

namespace troupe::test {

/// Whether the environment variable `var` names a folder of corpora to
/// replay (e.g. what a fuzzing run grew) instead of the seeds.
inline bool corpus_from_env(const char* var) {
  const char* env = std::getenv(var);
  return env != nullptr && *env != '\0';
}

/// The corpus of fuzz target `target`: the seeds and the reproducers of
/// fixed findings in tests/fuzz/corpus/<target>/, or, when `var` is set,
/// <$var>/<target>/ (or its corpus/ folder, the layout of a
/// scripts/fuzz.sh run).
inline std::filesystem::path corpus_dir(const std::string& target,
                                        const char* var) {
  if (!corpus_from_env(var))
    return std::filesystem::path{TROUPE_SOURCE_DIR} / "tests/fuzz/corpus"
           / target;
  auto dir = std::filesystem::path{std::getenv(var)} / target;
  return std::filesystem::is_directory(dir / "corpus") ? dir / "corpus" : dir;
}

/// The files of the corpus folder `dir`, sorted by name; the test ends
/// unless `dir` is a folder.
inline std::vector<std::filesystem::path>
corpus_files(const std::filesystem::path& dir) {
  BOOST_REQUIRE_MESSAGE(std::filesystem::is_directory(dir),
                        dir << " is not a folder");
  std::vector<std::filesystem::path> files;
  for (auto& e : std::filesystem::directory_iterator{dir})
    if (e.is_regular_file())
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

/// The bytes of the file at `p`.
inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in{p, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, {}};
}

} // namespace troupe::test
