// Which checkpoints of a folder a run may load
// (runtime/checkpoint/checkpoint_dir.hpp): its own for a recovery, a compatible
// one for a resume; a fresh run sets other runs' files aside; retention keeps a
// run's newest N.
#include "runtime/checkpoint/checkpoint_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include "runtime/base/errc.hpp"
#include "runtime/sparse/table_file.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

run_stamp stamp(const std::string& id, const std::string& optimizer = "adam",
                const std::string& hidden = "[8]") {
  return {id, identity_map{{"/model/hidden", hidden},
                           {"/training/optimizer/type", optimizer}}};
}

param_layout layout(int64_t n = 4) {
  param_layout l;
  l.add("w", {n});
  return l;
}

/// Writes ckpt-<step> of `s` with parameters all equal to `value`.
void write(const temp_dir& dir, int64_t step, const run_stamp& s,
           float value = 1, int64_t n = 4) {
  checkpoint c;
  c.step = step;
  c.layout = layout(n);
  c.params.assign(static_cast<size_t>(n), value);
  stamp_checkpoint(c, s);
  auto err = write_checkpoint(
    dir.file("ckpt-" + std::to_string(step) + ".safetensors"), c);
  BOOST_REQUIRE(!err);
}

} // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_dir)

BOOST_AUTO_TEST_CASE(only_checkpoint_files_are_listed_newest_first) {
  temp_dir dir;
  write(dir, 5, stamp("a"));
  write(dir, 40, stamp("a"));
  write(dir, 7, stamp("a"));
  BOOST_REQUIRE(::mkfifo(dir.file("ckpt-99.safetensors").c_str(), 0600) == 0);
  BOOST_REQUIRE(::mkdir(dir.file("ckpt-98.safetensors").c_str(), 0700) == 0);
  write_file(dir.file("ckpt-1x.safetensors"), "x");
  write_file(dir.file("ckpt-.safetensors"), "x");
  auto files = list_checkpoints(dir.path());
  BOOST_REQUIRE(files.size() == 3u);
  BOOST_TEST(files[0].step == 40);
  BOOST_TEST(files[2].step == 5);
}

BOOST_AUTO_TEST_CASE(a_recovery_loads_its_own_runs_checkpoint) {
  temp_dir dir;
  write(dir, 10, stamp("mine"), 1.f);
  write(dir, 20, stamp("mine"), 2.f);
  // Newer, of another run, and one of another model.
  write(dir, 14070, stamp("theirs"), 9.f);
  write(dir, 30000, stamp("small", "adam", "[2]"), 9.f, 2);
  auto found = load_newest(dir.path(), stamp("mine"), checkpoint_pick::this_run,
                           layout());
  BOOST_REQUIRE_MESSAGE(found, troupe::test::why(found));
  BOOST_REQUIRE(found->has_value());
  BOOST_TEST((*found)->ckpt.step == 20);
  BOOST_TEST((*found)->ckpt.params[0] == 2.f);
  // No checkpoint of this run at all: the files passed over are named.
  auto none = load_newest(dir.path(), stamp("new"), checkpoint_pick::this_run,
                          layout());
  BOOST_REQUIRE(!none);
  BOOST_TEST(describe(none.error())
                 .find("ckpt-14070.safetensors (of run "
                       "theirs)")
               != std::string::npos,
             describe(none.error()));
  // An empty folder is no error.
  temp_dir empty;
  auto nothing = load_newest(empty.path(), stamp("x"),
                             checkpoint_pick::this_run, layout());
  BOOST_REQUIRE(nothing);
  BOOST_TEST(!nothing->has_value());
}

BOOST_AUTO_TEST_CASE(a_resume_loads_the_newest_compatible_checkpoint) {
  temp_dir dir;
  write(dir, 10, stamp("old"), 1.f);
  write(dir, 50, stamp("sgd-run", "sgd"), 5.f);
  write(dir, 60, stamp("wide", "adam", "[8]"), 6.f, 8); // another layout
  auto found = load_newest(dir.path(), stamp("next"),
                           checkpoint_pick::compatible, layout());
  BOOST_REQUIRE_MESSAGE(found, troupe::test::why(found));
  BOOST_REQUIRE(found->has_value());
  BOOST_TEST((*found)->ckpt.step == 10);
  BOOST_TEST((*found)->ckpt.metadata.at("run_id") == "old");
  // None compatible: each is named with what differs.
  auto none = load_newest(dir.path(), stamp("next", "momentum"),
                          checkpoint_pick::compatible, layout());
  BOOST_REQUIRE(!none);
  auto why = describe(none.error());
  BOOST_TEST(
    why.find("ckpt-50.safetensors (resume digest ") != std::string::npos, why);
  BOOST_TEST(why.find("/training/optimizer/type (checkpoint: sgd, this run: "
                      "momentum)")
               != std::string::npos,
             why);
}

// A resume matches the resume identity: a checkpoint of another shard
// count or other nodes fits, one of another worker count does not; a file
// written before resume digests matches its whole config digest.
BOOST_AUTO_TEST_CASE(a_resume_fits_another_shard_count_but_not_other_workers) {
  auto on = [](const std::string& id, const std::string& shards,
               const std::string& workers) {
    return run_stamp{
      id, identity_map{{"/training/optimizer/type", "adam"},
                       {"/cluster/shards", shards},
                       {"/cluster/chief", "c"},
                       {"/cluster/nodes/0", "c 127.0.0.1:7000 shards " + shards
                                              + " workers " + workers}}};
  };
  temp_dir dir;
  write(dir, 30, on("two-shards", "2", "2"));
  auto found = load_newest(dir.path(), on("next", "4", "2"),
                           checkpoint_pick::compatible, layout());
  BOOST_REQUIRE_MESSAGE(found, troupe::test::why(found));
  BOOST_REQUIRE(found->has_value());
  BOOST_TEST((*found)->ckpt.metadata.at("run_id") == "two-shards");
  auto other = load_newest(dir.path(), on("next", "2", "3"),
                           checkpoint_pick::compatible, layout());
  BOOST_REQUIRE(!other);
  BOOST_TEST(describe(other.error())
                 .find("/cluster/workers (checkpoint: 2, "
                       "this run: 3)")
               != std::string::npos,
             describe(other.error()));
  // Without a resume digest (an older file), the whole config decides.
  temp_dir old_dir;
  checkpoint c;
  c.step = 9;
  c.layout = layout();
  c.params.assign(4, 1.f);
  stamp_checkpoint(c, on("old", "2", "2"));
  c.metadata.erase("resume_digest");
  BOOST_REQUIRE(!write_checkpoint(old_dir.file("ckpt-9.safetensors"), c));
  BOOST_TEST(load_newest(old_dir.path(), on("next", "2", "2"),
                         checkpoint_pick::compatible, layout())
               ->has_value());
  auto moved = load_newest(old_dir.path(), on("next", "4", "2"),
                           checkpoint_pick::compatible, layout());
  BOOST_REQUIRE(!moved);
  BOOST_TEST(describe(moved.error()).find("(config digest ")
               != std::string::npos,
             describe(moved.error()));
}

BOOST_AUTO_TEST_CASE(a_fresh_run_sets_other_runs_files_aside_and_loses_none) {
  temp_dir dir;
  auto nothing = set_aside_checkpoints(dir.path(), stamp("new"));
  BOOST_REQUIRE(nothing);
  BOOST_TEST(nothing->empty());
  write(dir, 14070, stamp("finished"));
  write(dir, 20, stamp("new"));
  // A tables file beside the other run's checkpoint goes with it.
  auto tables = tables_path_of(dir.file("ckpt-14070.safetensors"));
  write_file(tables, "rows");
  auto aside = set_aside_checkpoints(dir.path(), stamp("new"));
  BOOST_REQUIRE_MESSAGE(aside, troupe::test::why(aside));
  BOOST_TEST(*aside == dir.file("set-aside-new"));
  // This run's own file stays; the other run's files moved, intact.
  auto left = list_checkpoints(dir.path());
  BOOST_REQUIRE(left.size() == 1u);
  BOOST_TEST(left[0].step == 20);
  auto moved = list_checkpoints(*aside);
  BOOST_REQUIRE(moved.size() == 1u);
  BOOST_TEST(moved[0].step == 14070);
  auto back = read_checkpoint(moved[0].path);
  BOOST_REQUIRE(back);
  BOOST_TEST(back->metadata.at("run_id") == "finished");
  BOOST_TEST(file_exists(*aside + "/" + tables.substr(tables.rfind('/') + 1)));
  BOOST_TEST(!file_exists(tables));
  // Again: nothing left to move.
  auto again = set_aside_checkpoints(dir.path(), stamp("new"));
  BOOST_REQUIRE(again);
  BOOST_TEST(again->empty());
}

BOOST_AUTO_TEST_CASE(every_table_file_goes_with_its_checkpoint) {
  temp_dir dir;
  write(dir, 7, stamp("finished"));
  write(dir, 70, stamp("finished"));
  write(dir, 8, stamp("new"));
  // An external model's files, one per table; step 70's are not step 7's.
  std::vector<std::string> sevens;
  for (auto* table : {"item", "user.v2"}) {
    sevens.push_back(table_path_of(dir.file("ckpt-7.safetensors"), table));
    write_file(sevens.back(), "rows");
  }
  auto seventy = table_path_of(dir.file("ckpt-70.safetensors"), "item");
  write_file(seventy, "rows");
  auto eights = table_path_of(dir.file("ckpt-8.safetensors"), "item");
  write_file(eights, "rows");
  BOOST_TEST(table_files_beside(dir.file("ckpt-7.safetensors")) == sevens);
  auto aside = set_aside_checkpoints(dir.path(), stamp("new"));
  BOOST_REQUIRE_MESSAGE(aside, troupe::test::why(aside));
  for (auto& f : sevens) {
    BOOST_TEST(!file_exists(f), f);
    BOOST_TEST(file_exists(*aside + "/" + f.substr(f.rfind('/') + 1)), f);
  }
  BOOST_TEST(!file_exists(seventy));
  BOOST_TEST(file_exists(eights));
  // Retention removes a pruned checkpoint's table files with it.
  write(dir, 9, stamp("new"));
  BOOST_TEST(prune_checkpoints(dir.path(), stamp("new"), 1) == 1u);
  BOOST_TEST(!file_exists(eights));
  BOOST_TEST(file_exists(dir.file("ckpt-9.safetensors")));
}

BOOST_AUTO_TEST_CASE(a_checkpoints_tables_metadata_lists_its_files) {
  BOOST_TEST(table_file_names("").empty());
  BOOST_TEST(table_file_names("ckpt-3.tables.safetensors")
             == std::vector<std::string>{"ckpt-3.tables.safetensors"});
  BOOST_TEST(table_file_names("a,b.c")
             == (std::vector<std::string>{"a", "b.c"}));
  BOOST_TEST(table_path_of("/d/ckpt-3.safetensors", "item")
             == "/d/ckpt-3.table.item.safetensors");
}

BOOST_AUTO_TEST_CASE(retention_keeps_a_runs_newest_and_never_touches_others) {
  temp_dir dir;
  for (int64_t step : {10, 20, 30, 40, 50})
    write(dir, step, stamp("mine"));
  write(dir, 5, stamp("theirs"));
  BOOST_TEST(prune_checkpoints(dir.path(), stamp("mine"), 2) == 3u);
  auto files = list_checkpoints(dir.path());
  BOOST_REQUIRE(files.size() == 3u);
  BOOST_TEST(files[0].step == 50);
  BOOST_TEST(files[1].step == 40);
  BOOST_TEST(files[2].step == 5);
  BOOST_TEST(prune_checkpoints(dir.path(), stamp("mine"), 0) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
