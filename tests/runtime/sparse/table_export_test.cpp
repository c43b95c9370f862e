// Exports of a table (runtime/sparse/table_export): a full export and the
// deltas cut after it from tables that admit, evict and keep training (the
// rows stamped after the last export, the keys evicted since) read back
// bit for bit as the tables hold them at each export; the manifest's
// bad entries and a chain with a delta missing are refused, naming the
// file.
#include "runtime/sparse/table_export.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "runtime/base/errc.hpp"
#include "runtime/base/random.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

constexpr int dim = 3;

embedding_table_config exported_table_config() {
  embedding_table_config t;
  t.name = "items";
  t.vocabulary = uint64_t{1} << 40;
  t.dim = dim;
  t.seed = 5;
  t.changes = true;
  t.evict.steps_to_live = 40;
  t.evict.max_rows = 700;
  t.admit.type = row_admission::kind::probability;
  t.admit.probability = 0.7;
  return t;
}

/// Two shards' parts of one table, trained by pushes of Zipf-like keys
/// that drift, exported as the chief exports them.
struct two_parts {
  std::vector<std::unique_ptr<sparse_table>> parts;
  std::vector<int64_t> since; ///< each part's pushes at the last export
  export_manifest manifest;
  int64_t sequence = 0;

  two_parts() {
    sparse_optimizer_config o;
    o.type = sparse_optimizer_config::kind::adam;
    o.learning_rate = 0.01;
    for (int p = 0; p < 2; ++p)
      parts.push_back(
        std::make_unique<sparse_table>(exported_table_config(), o));
  }

  void train(splitmix64& rng, int steps, uint64_t drift) {
    for (int s = 0; s < steps; ++s) {
      std::vector<std::vector<uint64_t>> ids(2);
      for (int k = 0; k < 40; ++k) {
        auto r = rng.uniform01();
        uint64_t id = drift + static_cast<uint64_t>(2000 * r * r * r);
        ids[static_cast<size_t>(shard_of_row(id, 2))].push_back(id);
      }
      for (size_t p = 0; p < 2; ++p) {
        // Built by push_back: GCC 12 warns falsely of a sized vector here.
        std::vector<float> g;
        while (g.size() < ids[p].size() * dim)
          g.push_back(static_cast<float>(rng.uniform01() - 0.5));
        BOOST_REQUIRE(!parts[p]->push(ids[p].data(), ids[p].size(), g.data()));
      }
    }
  }

  /// Writes export `sequence` (full when `full`) into `dir`.
  void export_to(const std::string& dir, bool full) {
    std::vector<sparse_table*> tables;
    for (auto& p : parts)
      tables.push_back(p.get());
    auto e = write_table_export(dir, tables, sequence++,
                                full ? std::vector<int64_t>{} : since);
    BOOST_REQUIRE(e);
    since.clear();
    for (auto& p : parts)
      since.push_back(p->pushes());
    manifest.exports.push_back(*e);
    BOOST_REQUIRE(!write_export_manifest(dir, manifest));
  }

  /// Every row the parts hold, by id.
  std::map<uint64_t, std::vector<float>> live() const {
    std::map<uint64_t, std::vector<float>> out;
    for (auto& t : parts)
      t->for_each_row([&](uint64_t id, const float* v, const float* const*) {
        out[id].assign(v, v + dim);
      });
    return out;
  }
};

void require_equal(const exported_table& got,
                   const std::map<uint64_t, std::vector<float>>& live) {
  BOOST_REQUIRE_EQUAL(got.ids.size(), live.size());
  size_t i = 0;
  for (auto& [id, v] : live) {
    BOOST_REQUIRE_EQUAL(got.ids[i], id);
    BOOST_REQUIRE(
      std::memcmp(got.values.data() + i * dim, v.data(), dim * sizeof(float))
      == 0);
    ++i;
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(table_export)

BOOST_AUTO_TEST_CASE(a_full_export_and_its_deltas_read_back_as_the_table_is) {
  temp_dir dir;
  two_parts t;
  splitmix64 rng{3};
  t.train(rng, 200, 0);
  t.export_to(dir.path(), true);
  require_equal(*read_exported_table(dir.path(), "items"), t.live());
  uint64_t evicted = 0, rows = 0;
  for (int round = 1; round <= 5; ++round) {
    // The keys drift: old ones stop coming and are evicted, new ones come.
    t.train(rng, 30 + static_cast<int>(rng.below(60)),
            static_cast<uint64_t>(round) * 300);
    t.export_to(dir.path(), false);
    auto got = read_exported_table(dir.path(), "items");
    BOOST_REQUIRE(got);
    BOOST_REQUIRE_EQUAL(got->sequence, round);
    require_equal(*got, t.live());
    evicted += t.manifest.exports.back().evicted;
    rows += t.manifest.exports.back().rows;
  }
  BOOST_TEST(evicted > 0);
  // A delta holds the rows changed, not the table.
  BOOST_TEST(t.manifest.exports.back().rows < t.live().size() * 2);
  // An earlier point of the chain still reads as it was: the full export.
  auto at_two = read_exported_table(dir.path(), "items", 0);
  BOOST_REQUIRE(at_two);
  BOOST_TEST(at_two->sequence == 0);
  BOOST_TEST(rows > 0);
}

BOOST_AUTO_TEST_CASE(a_chain_with_a_delta_missing_is_refused) {
  temp_dir dir;
  two_parts t;
  splitmix64 rng{4};
  t.train(rng, 100, 0);
  t.export_to(dir.path(), true);
  t.train(rng, 50, 100);
  t.export_to(dir.path(), false);
  t.train(rng, 50, 200);
  t.export_to(dir.path(), false);
  auto m = t.manifest;
  m.exports.erase(m.exports.begin() + 1);
  BOOST_REQUIRE(!write_export_manifest(dir.path(), m));
  auto got = read_exported_table(dir.path(), "items");
  BOOST_REQUIRE(!got);
  BOOST_TEST(to_string(got.error()).find("export-2.table.items.safetensors")
               != std::string::npos,
             to_string(got.error()));
  BOOST_TEST(to_string(got.error()).find("does not follow")
               != std::string::npos,
             to_string(got.error()));
}

BOOST_AUTO_TEST_CASE(a_bad_manifest_is_refused_naming_the_entry) {
  temp_dir dir;
  auto write = [&](const std::string& text) {
    std::ofstream{export_manifest_path(dir.path())} << text;
    return read_export_manifest(dir.path());
  };
  auto says = [](const caf::expected<export_manifest>& m,
                 const std::string& what) {
    return !m && to_string(m.error()).find(what) != std::string::npos;
  };
  BOOST_TEST(!read_export_manifest(dir.path() + "/none"));
  BOOST_TEST(says(write("{"), "not JSON"));
  BOOST_TEST(says(write(R"({"format": "x", "version": 1, "exports": []})"),
                  "not a troupe exports manifest"));
  const std::string head = R"({"format": "troupe-exports", "version": 1, )";
  BOOST_TEST(
    says(write(head + R"("exports": [{"sequence": 0}]})"), "exports[0]"));
  BOOST_TEST(says(write(head + R"("exports": [{"sequence": 0, "kind": "half",
    "step": 1, "time": 0, "tables": {}}]})"),
                  "half"));
  BOOST_TEST(says(write(head + R"("exports": [{"sequence": 0, "kind": "full",
    "step": 1, "time": 0, "tables": {"t": "../x"}}]})"),
                  "not a file in the folder"));
  BOOST_TEST(says(write(head + R"("exports": [
    {"sequence": 1, "kind": "full", "step": 1, "time": 0, "tables": {}},
    {"sequence": 1, "kind": "delta", "step": 2, "time": 0, "tables": {}}]})"),
                  "exports[1]: sequence 1 does not follow 1"));
  auto ok = write(head + R"("exports": []})");
  BOOST_REQUIRE(ok);
  BOOST_TEST(ok->exports.empty());
  auto none = read_exported_table(dir.path(), "items");
  BOOST_TEST(!none);
}

BOOST_AUTO_TEST_SUITE_END()
