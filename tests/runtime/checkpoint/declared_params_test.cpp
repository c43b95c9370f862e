// The parameters a user declares for an external model: a safetensors file
// as PyTorch writes one becomes the run's layout and initial values, in
// the file's order; a file troupe cannot hold is refused with the tensor's
// name and what to do.
#include "runtime/checkpoint/declared_params.hpp"

#include <boost/test/unit_test.hpp>

#include <limits>

#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

std::string refusal(const std::string& path) {
  auto got = read_declared_params(path);
  BOOST_REQUIRE(!got);
  BOOST_TEST((got.error() == errc::bad_format));
  return describe(got.error());
}

bool says(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(declared_params)

BOOST_AUTO_TEST_CASE(a_user_file_becomes_the_layout_and_initial_values) {
  temp_dir dir;
  auto path = dir.file("model.safetensors");
  write_user_safetensors(path, {{"fc1.weight", "[2,3]", {1, 2, 3, 4, 5, 6}},
                                {"fc1.bias", "[2]", {-1, -2}},
                                {"scale", "[]", {0.5f}}});
  auto got = read_declared_params(path);
  BOOST_REQUIRE_MESSAGE(got, test::why(got));
  auto& ts = got->layout.tensors();
  BOOST_REQUIRE(ts.size() == 3u);
  BOOST_TEST(ts[0].name == "fc1.weight");
  BOOST_TEST((ts[0].dims == shape{2, 3}));
  BOOST_TEST(ts[1].name == "fc1.bias");
  BOOST_TEST(ts[1].offset == 6u);
  BOOST_TEST(ts[2].name == "scale");
  BOOST_TEST(ts[2].dims.empty());
  BOOST_TEST(got->values
             == (std::vector<float>{1, 2, 3, 4, 5, 6, -1, -2, 0.5f}));
  BOOST_TEST(describe_declared(got->layout)
             == "external (3 tensors, 9 floats)");
}

BOOST_AUTO_TEST_CASE(a_file_written_from_cpp_reads_back_under_the_same_names) {
  temp_dir dir;
  auto path = dir.file("model.safetensors");
  troupe::declared_params p;
  p.layout.add("encoder.weight", {2, 3});
  p.layout.add("encoder.bias", {2});
  p.values = {1, 2, 3, 4, 5, 6, -1, -2};
  BOOST_REQUIRE(!write_declared_params(path, p));
  auto got = read_declared_params(path);
  BOOST_REQUIRE(got);
  BOOST_TEST((got->layout == p.layout));
  BOOST_TEST(got->values == p.values);
  // Values that do not fit the layout: refused, nothing written.
  p.values.pop_back();
  auto other = dir.file("short.safetensors");
  auto err = write_declared_params(other, p);
  BOOST_TEST((err == errc::wrong_size));
  BOOST_TEST(says(describe(err), "7 values, the layout needs 8"));
  BOOST_TEST(!read_declared_params(other));
}

BOOST_AUTO_TEST_CASE(a_tensor_troupe_cannot_hold_is_refused_by_name) {
  temp_dir dir;
  auto path = dir.file("bad.safetensors");
  // BatchNorm's counter, as a state_dict has it (8 bytes: 2 floats' worth).
  write_user_safetensors(path,
                         {{"bn.weight", "[2]", {1, 1}},
                          {"bn.num_batches_tracked", "[]", {0, 0}, "I64"}});
  auto why = refusal(path);
  BOOST_TEST(says(why, "bad.safetensors"), why);
  BOOST_TEST(says(why, "tensor bn.num_batches_tracked has dtype I64"), why);
  BOOST_TEST(says(why, "is a buffer: write the file with "
                       "write_parameters(path, model)"),
             why);

  write_user_safetensors(path, {{"w", "[2]", {1, 1}, "F64"}});
  why = refusal(path);
  BOOST_TEST(says(why, "tensor w has dtype F64"), why);
  BOOST_TEST(says(why, "tensor.float()"), why);

  write_user_safetensors(path, {{"empty", "[0,3]", {}}});
  BOOST_TEST(says(refusal(path), "tensor empty has no elements"));

  write_user_safetensors(path, {{"w", "[3]", {1, 2}}});
  BOOST_TEST(says(refusal(path), "tensor w has 8 bytes of data, its shape "
                                 "needs 12"));

  write_user_safetensors(
    path, {{"w", "[2]", {1, std::numeric_limits<float>::quiet_NaN()}}});
  BOOST_TEST(says(refusal(path), "tensor w holds a NaN or infinite value "
                                 "(element 1)"));

  write_user_safetensors(path, {});
  BOOST_TEST(says(refusal(path), "holds no tensors"));

  test::write_file(path, "not a safetensors file at all");
  refusal(path);

  auto missing = read_declared_params(dir.file("absent.safetensors"));
  BOOST_REQUIRE(!missing);
  BOOST_TEST((missing.error() == errc::file_not_found));
}

namespace {

/// `values` as the bytes of int64 elements.
std::string int64_bytes(const std::vector<int64_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(int64_t));
}

} // namespace

BOOST_AUTO_TEST_CASE(buffers_the_metadata_names_are_held_as_floats) {
  temp_dir dir;
  auto path = dir.file("bn.safetensors");
  // A BatchNorm1d(2)'s state_dict as write_parameters(path, model) writes
  // it: its int64 counter in its own dtype.
  write_user_safetensors(
    path,
    {{"bn.weight", "[2]", {1, 1}},
     {"bn.running_mean", "[2]", {0.5f, -0.5f}},
     {"bn.num_batches_tracked", "[]", {}, "I64", int64_bytes({42})}},
    R"({"troupe.buffers":"{\"bn.running_mean\":\"F32\",)"
    R"(\"bn.num_batches_tracked\":\"I64\"}"})");
  auto got = read_declared_params(path);
  BOOST_REQUIRE_MESSAGE(got, test::why(got));
  auto& ts = got->layout.tensors();
  BOOST_REQUIRE(ts.size() == 3u);
  BOOST_TEST(!ts[0].buffer);
  BOOST_TEST(ts[1].buffer);
  BOOST_TEST(ts[1].dtype == "F32");
  BOOST_TEST(ts[2].buffer);
  BOOST_TEST(ts[2].dtype == "I64");
  BOOST_TEST(got->values == (std::vector<float>{1, 1, 0.5f, -0.5f, 42}));
  BOOST_TEST(got->layout.has_buffers());
  // Written back from C++ (as float32, the dtypes in the metadata), it
  // reads the same.
  auto again = dir.file("again.safetensors");
  BOOST_REQUIRE(!write_declared_params(again, *got));
  auto back = read_declared_params(again);
  BOOST_REQUIRE_MESSAGE(back, test::why(back));
  BOOST_TEST(back->values == got->values);
  BOOST_TEST(back->layout.tensors()[2].buffer);
  BOOST_TEST(back->layout.tensors()[2].dtype == "I64");
}

BOOST_AUTO_TEST_CASE(buffers_troupe_cannot_hold_are_refused_by_name) {
  temp_dir dir;
  auto path = dir.file("bad.safetensors");
  auto buffers = [](const std::string& list) {
    return "{\"troupe.buffers\":\"" + list + "\"}";
  };
  write_user_safetensors(path, {{"w", "[1]", {1}}},
                         buffers(R"({\"v\":\"I64\"})"));
  BOOST_TEST(says(refusal(path), "names buffer v, which is no tensor of the "
                                 "file"));
  write_user_safetensors(path, {{"w", "[1]", {1}}}, buffers("[1, 2]"));
  BOOST_TEST(says(refusal(path), "is not a JSON object of buffer names"));
  // Nested deep enough to overflow a recursive parser's stack: not parsed.
  write_user_safetensors(path, {{"w", "[1]", {1}}},
                         buffers(std::string(100000, '[')));
  BOOST_TEST(says(refusal(path), "is not a JSON object of buffer names"));
  write_user_safetensors(path, {{"w", "[1]", {1}, "C64"}},
                         buffers(R"({\"w\":\"C64\"})"));
  BOOST_TEST(says(refusal(path), "buffer w has dtype C64"));
  // A counter past 2^24 would lose steps as a float.
  write_user_safetensors(
    path, {{"n", "[]", {}, "I64", int64_bytes({(int64_t{1} << 24) + 1})}},
    buffers(R"({\"n\":\"I64\"})"));
  BOOST_TEST(says(refusal(path), "buffer n holds 16777217 (element 0)"));
  // Data of the wrong size for its dtype.
  write_user_safetensors(path, {{"n", "[2]", {}, "I64", int64_bytes({1})}},
                         buffers(R"({\"n\":\"I64\"})"));
  BOOST_TEST(says(refusal(path), "tensor n has 8 bytes of data, its shape "
                                 "needs 16"));
}

BOOST_AUTO_TEST_SUITE_END()
