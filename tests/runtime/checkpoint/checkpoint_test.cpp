#include "runtime/checkpoint/checkpoint.hpp"

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <cmath>
#include <fstream>
#include <sys/stat.h>

#include "runtime/base/errc.hpp"
#include "runtime/checkpoint/checkpoint_assembly.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

troupe::checkpoint sample() {
  troupe::checkpoint c;
  c.step = 1234;
  c.layout.add("dense0/w", {3, 2});
  c.layout.add("dense0/b", {2});
  for (size_t i = 0; i < 8; ++i)
    c.params.push_back(0.1f * static_cast<float>(i) - 0.3f);
  c.slots.emplace_back("adam_m", std::vector<float>(8, 0.5f));
  c.slots.emplace_back("adam_v", std::vector<float>(8, 0.25f));
  c.metadata["optimizer"] = "adam";
  return c;
}

std::string read_all(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, {}};
}

std::string error_of(const std::string& path) {
  auto c = read_checkpoint(path);
  BOOST_REQUIRE(!c);
  return describe(c.error());
}

} // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(round_trip_is_bitwise) {
  temp_dir tmp;
  auto path = tmp.file("c.safetensors");
  auto c = sample();
  BOOST_REQUIRE(!write_checkpoint(path, c));
  auto back = read_checkpoint(path);
  BOOST_REQUIRE_MESSAGE(back, troupe::test::why(back));
  BOOST_TEST(back->step == 1234);
  BOOST_TEST(!c.layout.compare(back->layout));
  BOOST_TEST(std::memcmp(back->params.data(), c.params.data(), 32) == 0);
  BOOST_TEST(back->slots.size() == 2u);
  BOOST_TEST(back->slots[0].first == "adam_m");
  BOOST_TEST(back->slots[1].second == c.slots[1].second);
  BOOST_TEST(back->metadata.at("optimizer") == "adam");
  // No temporary file is left behind.
  BOOST_TEST(troupe::test::files_in(tmp.path()).size() == 1u);
}

BOOST_AUTO_TEST_CASE(buffers_and_their_dtypes_survive_a_round_trip) {
  temp_dir tmp;
  auto path = tmp.file("c.safetensors");
  auto c = sample();
  c.layout.add_buffer("bn/running_mean", {2}, "F32");
  c.layout.add_buffer("bn/num_batches_tracked", {}, "I64");
  c.params.insert(c.params.end(), {0.5f, -0.5f, 7.f});
  for (auto& [name, slot] : c.slots)
    slot.resize(c.params.size(), 0.f);
  BOOST_REQUIRE(!write_checkpoint(path, c));
  auto back = read_checkpoint(path);
  BOOST_REQUIRE_MESSAGE(back, troupe::test::why(back));
  auto& ts = back->layout.tensors();
  BOOST_REQUIRE(ts.size() == 4u);
  BOOST_TEST(!ts[0].buffer);
  BOOST_TEST(ts[2].buffer);
  BOOST_TEST(ts[3].buffer);
  BOOST_TEST(ts[3].dtype == "I64");
  BOOST_TEST(back->params[10] == 7.f);
  // The list of buffers is the file's, not a metadata key of the run's.
  BOOST_TEST(read_all(path).find("troupe.buffers") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_shards_slices_assemble_into_the_whole_vector) {
  auto whole = sample();
  // Two shards: [0, 5) and [5, 8) of the flat vector and of each slot.
  std::vector<flat_range> ranges{{0, 5}, {5, 8}};
  std::vector<std::vector<float>> values(2);
  std::vector<std::vector<std::vector<float>>> slots(2);
  for (size_t i = 0; i < 2; ++i) {
    values[i] = slice_of(whole.params, ranges[i]);
    for (auto& [name, slot] : whole.slots)
      slots[i].push_back(slice_of(slot, ranges[i]));
  }
  std::vector<shard_slice> slices{{&values[0], &slots[0]},
                                  {&values[1], &slots[1]}};
  auto c = assemble_checkpoint(7, whole.layout, ranges, slices,
                               {"adam_m", "adam_v"});
  BOOST_REQUIRE_MESSAGE(c, troupe::test::why(c));
  BOOST_TEST(c->step == 7);
  BOOST_TEST(c->params == whole.params);
  BOOST_REQUIRE(c->slots.size() == 2u);
  BOOST_TEST(c->slots[1].first == "adam_v");
  BOOST_TEST(c->slots[1].second == whole.slots[1].second);
  // A shard without the run's second slot, or a slice of another size.
  slots[1].pop_back();
  auto short_slot = assemble_checkpoint(7, whole.layout, ranges, slices,
                                        {"adam_m", "adam_v"});
  BOOST_REQUIRE(!short_slot);
  BOOST_TEST((short_slot.error() == errc::wrong_size));
  values[0].pop_back();
  BOOST_TEST(!assemble_checkpoint(7, whole.layout, ranges, slices, {}));
}

BOOST_AUTO_TEST_CASE(file_is_plain_safetensors) {
  temp_dir tmp;
  auto path = tmp.file("c.safetensors");
  BOOST_REQUIRE(!write_checkpoint(path, sample()));
  auto bytes = read_all(path);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  BOOST_TEST(len % 8 == 0u);
  std::string header = bytes.substr(8, len);
  BOOST_TEST(
    header.find(
      R"("params/dense0/w":{"data_offsets":[0,24],"dtype":"F32","shape":[3,2]})")
      != std::string::npos,
    header);
  BOOST_TEST(bytes.size() == 8 + len + 3 * 8 * 4);
}

BOOST_AUTO_TEST_CASE(truncated_and_corrupt_files_are_refused) {
  temp_dir tmp;
  auto path = tmp.file("c.safetensors");
  BOOST_REQUIRE(!write_checkpoint(path, sample()));
  auto bytes = read_all(path);
  auto cut = tmp.file("cut.safetensors");
  test::write_file(cut, bytes.substr(0, bytes.size() - 10));
  BOOST_TEST(error_of(cut).find(cut + ": truncated: tensor ") == 0,
             error_of(cut));
  test::write_file(cut, bytes.substr(0, 5));
  BOOST_TEST(error_of(cut)
             == cut + ": truncated: 5 bytes, not even a safetensors header");
  test::write_file(cut, bytes.substr(0, 40));
  BOOST_TEST(error_of(cut).find(cut + ": truncated: header claims ") == 0);
  auto bad = bytes;
  bad[9] = '#';
  test::write_file(cut, bad);
  BOOST_TEST(error_of(cut).find(cut + ": corrupt safetensors header") == 0);
  auto missing = read_checkpoint(tmp.file("none.safetensors"));
  BOOST_TEST((missing.error() == errc::file_not_found));
}

BOOST_AUTO_TEST_CASE(foreign_files_and_other_versions_are_refused) {
  temp_dir tmp;
  auto path = tmp.file("x.safetensors");
  std::string header =
    R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  uint64_t len = header.size();
  std::string bytes(reinterpret_cast<char*>(&len), 8);
  test::write_file(path, bytes + header + std::string(4, '\0'));
  BOOST_TEST(error_of(path)
             == path + ": not a troupe checkpoint (no __metadata__)");
  BOOST_REQUIRE(!write_checkpoint(path, sample()));
  auto text = read_all(path);
  auto pos = text.find(R"("version":"1")");
  text[pos + 11] = '9';
  test::write_file(path, text);
  BOOST_TEST(error_of(path)
             == path
                  + ": unsupported checkpoint version \"9\", this build "
                    "reads version 1");
}

BOOST_AUTO_TEST_CASE(layout_mismatch_names_the_file) {
  auto c = sample();
  troupe::param_layout other;
  other.add("dense0/w", {3, 3});
  other.add("dense0/b", {3});
  auto err = check_layout(c, other, "ck.safetensors");
  BOOST_REQUIRE(err);
  BOOST_TEST(describe(err)
             == "ck.safetensors: checkpoint does not fit this model: tensor 0 "
                "is dense0/w (3x2), expected dense0/w (3x3)");
  BOOST_TEST(!check_layout(c, c.layout, "ck"));
}

BOOST_AUTO_TEST_CASE(wrong_sized_vectors_are_not_written) {
  temp_dir tmp;
  auto c = sample();
  c.params.pop_back();
  auto err = write_checkpoint(tmp.file("c"), c);
  BOOST_TEST((err == errc::wrong_size));
  BOOST_TEST(!read_checkpoint(tmp.file("c")));
}

BOOST_AUTO_TEST_CASE(reserved_metadata_keys_are_not_written) {
  temp_dir tmp;
  for (const char* key : {"format", "version", "step"}) {
    auto c = sample();
    c.metadata[key] = "7";
    auto err = write_checkpoint(tmp.file("c"), c);
    BOOST_TEST((err == errc::invalid_argument));
    BOOST_TEST(describe(err)
               == tmp.file("c") + ": metadata key \"" + key
                    + "\" is reserved for the checkpoint format");
    BOOST_TEST(!read_checkpoint(tmp.file("c")));
  }
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A safetensors file made by hand: `header` (JSON text) and `data`.
std::string hand_made(const temp_dir& tmp, const std::string& name,
                      const std::string& header, const std::string& data) {
  auto path = tmp.file(name);
  std::ofstream out{path, std::ios::binary};
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header << data;
  return path;
}

std::string floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(float));
}

/// A one-tensor checkpoint header with `step` and extra tensors.
std::string header_with(const std::string& step,
                        const std::string& extra = "") {
  return R"({"__metadata__":{"format":"troupe-checkpoint","version":"1","step":")"
         + step
         + R"("},"params/w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"
         + extra + "}";
}

} // namespace

BOOST_AUTO_TEST_SUITE(checkpoint) // strict reading

BOOST_AUTO_TEST_CASE(a_step_is_a_plain_non_negative_integer) {
  temp_dir tmp;
  auto ok = hand_made(tmp, "ok", header_with("12"), floats({1, 2}));
  auto c = read_checkpoint(ok);
  BOOST_REQUIRE_MESSAGE(c, troupe::test::why(c));
  BOOST_TEST(c->step == 12);
  for (auto bad : {"-5", "1e3", "100x", "", " 7", "99999999999999999999"}) {
    auto path = hand_made(tmp, "bad", header_with(bad), floats({1, 2}));
    auto why = error_of(path);
    BOOST_TEST(why.find("metadata step is not a non-negative integer: \""
                        + std::string{bad} + "\"")
                 != std::string::npos,
               why);
  }
}

BOOST_AUTO_TEST_CASE(nan_overlaps_and_odd_shapes_are_refused) {
  temp_dir tmp;
  auto why = error_of(
    hand_made(tmp, "nan", header_with("1"), floats({1, std::nanf("")})));
  BOOST_TEST(why.find("params holds a NaN or infinite value (element 1)")
               != std::string::npos,
             why);
  why = error_of(
    hand_made(tmp, "inf", header_with("1"), floats({HUGE_VALF, 1})));
  BOOST_TEST(why.find("NaN or infinite") != std::string::npos, why);
  // An optimizer slot whose bytes are the parameters' own.
  why = error_of(hand_made(
    tmp, "alias",
    header_with(
      "1", R"(,"adam_m/w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"),
    floats({1, 2})));
  BOOST_TEST(why.find("overlap") != std::string::npos, why);
  for (auto shape :
       {"[0]", "[-2]", "[1.5]", "[4294967296,4294967296]", R"(["2"])"}) {
    why = error_of(hand_made(
      tmp, "shape",
      R"({"__metadata__":{"format":"troupe-checkpoint","version":"1","step":"1"},)"
      R"("params/w":{"dtype":"F32","shape":)"
        + std::string{shape} + R"(,"data_offsets":[0,8]}})",
      floats({1, 2})));
    BOOST_TEST(why.find("tensor params/w has") != std::string::npos, why);
  }
  why = error_of(hand_made(
    tmp, "dtype",
    R"({"__metadata__":{"format":"troupe-checkpoint","version":"1","step":"1"},)"
    R"("params/w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})",
    floats({1, 2})));
  BOOST_TEST(why.find("has dtype 7, expected F32") != std::string::npos, why);
  // A tensor that is no parameter's and no slot's.
  why = error_of(hand_made(
    tmp, "stray",
    header_with(
      "1", R"(,"adam_m/x":{"dtype":"F32","shape":[2],"data_offsets":[8,16]})"),
    floats({1, 2, 3, 4})));
  BOOST_TEST(why.find("adam_m/w is missing") != std::string::npos, why);
  // Nesting deeper than any safetensors header.
  std::string deep =
    R"({"__metadata__":{"format":"troupe-checkpoint","version":"1","step":"1"},"x":)";
  for (int i = 0; i < 5000; ++i)
    deep += "[";
  why = error_of(hand_made(tmp, "deep", deep, ""));
  BOOST_TEST(why.find("corrupt safetensors header") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(only_regular_files_are_read) {
  temp_dir tmp;
  auto fifo = tmp.file("ckpt-9.safetensors");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO for reading would wait for a writer forever.
  auto why = error_of(fifo);
  BOOST_TEST(why.find("not a regular file") != std::string::npos, why);
  why = error_of(tmp.path());
  BOOST_TEST(why.find("not a regular file") != std::string::npos, why);
}

BOOST_AUTO_TEST_SUITE_END()
