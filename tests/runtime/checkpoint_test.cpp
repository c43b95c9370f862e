#include "runtime/checkpoint.hpp"

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <dirent.h>
#include <fstream>

#include "runtime/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using troupe::test::temp_dir;

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
  int entries = 0;
  DIR* d = opendir(tmp.path().c_str());
  while (auto* e = readdir(d))
    entries += e->d_name[0] != '.';
  closedir(d);
  BOOST_TEST(entries == 1);
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
  BOOST_TEST(header.find(R"("params/dense0/w":{"data_offsets":[0,24],"dtype":"F32","shape":[3,2]})")
             != std::string::npos, header);
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
  std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
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
             == path + ": unsupported checkpoint version \"9\", this build "
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
