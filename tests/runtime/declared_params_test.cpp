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
using troupe::test::temp_dir;
using troupe::test::user_tensor;
using troupe::test::write_user_safetensors;

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
  write_user_safetensors(path, {{"bn.weight", "[2]", {1, 1}},
                                {"bn.num_batches_tracked", "[]", {0, 0}, "I64"}});
  auto why = refusal(path);
  BOOST_TEST(says(why, "bad.safetensors"), why);
  BOOST_TEST(says(why, "tensor bn.num_batches_tracked has dtype I64"), why);
  BOOST_TEST(says(why, "leave it out of the file"), why);

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

BOOST_AUTO_TEST_SUITE_END()
