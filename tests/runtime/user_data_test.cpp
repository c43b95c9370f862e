// NumPy .npy and CSV datasets (load_npy, load_csv, and load_datasets with
// data.classes): good files in every shape and type the readers take, and
// bad files, each refused with the file, the place and the reason.
#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>
#include <zlib.h>

#include "runtime/base/errc.hpp"
#include "runtime/config/config.hpp"
#include "test_util.hpp"

using namespace troupe;
using troupe::test::temp_dir;
using troupe::test::why;
using troupe::test::write_file;

namespace {

/// An .npy file as np.save writes it (test_util.hpp's npy_header).
std::string npy(const std::string& descr, const std::string& shape,
                const std::string& data, bool fortran = false,
                int major = 1) {
  return troupe::test::npy_header(descr, shape, fortran, major) + data;
}

template <class T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    s.append(b, sizeof b);
  }
  return s;
}

/// A zip archive of `members` (name, bytes) as np.savez writes it, each
/// stored or deflated (np.savez_compressed), with CRC-32s.
std::string zip_of(const std::vector<std::pair<std::string, std::string>>& members,
                   bool deflated) {
  auto u16 = [](uint32_t v) { return bytes_of<uint16_t>({static_cast<uint16_t>(v)}); };
  auto u32 = [](uint32_t v) { return bytes_of<uint32_t>({v}); };
  std::string out, dir;
  for (auto& [name, data] : members) {
    std::string packed = data;
    if (deflated) {
      z_stream z{};
      deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
      packed.assign(deflateBound(&z, data.size()), '\0');
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
      z.avail_in = static_cast<uInt>(data.size());
      z.next_out = reinterpret_cast<Bytef*>(packed.data());
      z.avail_out = static_cast<uInt>(packed.size());
      deflate(&z, Z_FINISH);
      packed.resize(z.total_out);
      deflateEnd(&z);
    }
    auto crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(data.data()),
            static_cast<uInt>(data.size())));
    auto method = deflated ? 8u : 0u;
    auto offset = static_cast<uint32_t>(out.size());
    out += u32(0x04034b50) + u16(20) + u16(0) + u16(method) + u16(0) + u16(0)
           + u32(crc) + u32(static_cast<uint32_t>(packed.size()))
           + u32(static_cast<uint32_t>(data.size()))
           + u16(static_cast<uint32_t>(name.size())) + u16(0) + name + packed;
    dir += u32(0x02014b50) + u16(20) + u16(20) + u16(0) + u16(method) + u16(0)
           + u16(0) + u32(crc) + u32(static_cast<uint32_t>(packed.size()))
           + u32(static_cast<uint32_t>(data.size()))
           + u16(static_cast<uint32_t>(name.size())) + u16(0) + u16(0) + u16(0)
           + u16(0) + u32(0) + u32(offset) + name;
  }
  auto n = static_cast<uint32_t>(members.size());
  return out + dir + u32(0x06054b50) + u16(0) + u16(0) + u16(n) + u16(n)
         + u32(static_cast<uint32_t>(dir.size()))
         + u32(static_cast<uint32_t>(out.size())) + u16(0);
}

/// Writes features and labels; returns load_npy's answer.
caf::expected<dataset> read_npy(const temp_dir& dir, const std::string& x,
                                const std::string& y) {
  write_file(dir.file("x.npy"), x);
  write_file(dir.file("y.npy"), y);
  return load_npy(dir.file("x.npy"), dir.file("y.npy"));
}

std::string npy_error(const temp_dir& dir, const std::string& x,
                      const std::string& y) {
  auto d = read_npy(dir, x, y);
  BOOST_TEST(!d);
  return why(d);
}

caf::expected<dataset> read_csv(const temp_dir& dir, const std::string& text,
                                const std::string& label = "label") {
  write_file(dir.file("d.csv"), text);
  return load_csv(dir.file("d.csv"), label);
}

std::string csv_error(const temp_dir& dir, const std::string& text,
                      const std::string& label = "label") {
  auto d = read_csv(dir, text, label);
  BOOST_TEST(!d);
  return why(d);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(user_data)

BOOST_AUTO_TEST_CASE(npy_float_features_and_int64_labels) {
  temp_dir dir;
  auto d = read_npy(dir, npy("<f4", "(2, 3)", bytes_of<float>({1, 2, 3, 4, 5, -6})),
                    npy("<i8", "(2,)", bytes_of<int64_t>({4, 0})));
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->count == 2);
  BOOST_TEST(d->height == 1);
  BOOST_TEST(d->width == 3);
  BOOST_TEST(d->channels == 1);
  BOOST_TEST(d->classes == 5);
  BOOST_TEST(d->features.to_floats()
             == (std::vector<float>{1, 2, 3, 4, 5, -6}));
  BOOST_TEST(d->labels == (std::vector<int32_t>{4, 0}));
}

BOOST_AUTO_TEST_CASE(npy_uint8_images_scale_and_keep_their_shape) {
  temp_dir dir;
  // (N, H, W): one channel; uint8 scaled by 1/255 as the image readers do.
  auto d = read_npy(dir, npy("|u1", "(1, 2, 2)", std::string("\x00\xff\x33\x66", 4)),
                    npy("|u1", "(1,)", std::string(1, '\x01')));
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->height == 2);
  BOOST_TEST(d->width == 2);
  BOOST_TEST(d->channels == 1);
  BOOST_TEST(d->features.to_floats()[1] == 1.f);
  BOOST_TEST(d->features.to_floats()[2] == 0.2f,
             boost::test_tools::tolerance(1e-6f));
  // (N, H, W, C), float64, int32 labels, a version 2 header.
  d = read_npy(dir, npy("<f8", "(2, 1, 2, 3)", bytes_of<double>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), false, 2),
               npy("<i4", "(2,)", bytes_of<int32_t>({1, 2})));
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->height == 1);
  BOOST_TEST(d->width == 2);
  BOOST_TEST(d->channels == 3);
  BOOST_TEST(d->features.to_floats()[11] == 11.f);
  BOOST_TEST(d->classes == 3);
  // Every integer label type.
  for (auto [descr, raw] : std::vector<std::pair<std::string, std::string>>{
         {"|i1", bytes_of<int8_t>({3})}, {"<i2", bytes_of<int16_t>({3})},
         {"<u2", bytes_of<uint16_t>({3})}, {"<u4", bytes_of<uint32_t>({3})},
         {"<u8", bytes_of<uint64_t>({3})}, {"=i8", bytes_of<int64_t>({3})}}) {
    d = read_npy(dir, npy("<f4", "(1, 1)", bytes_of<float>({0})),
                 npy(descr, "(1,)", raw));
    BOOST_TEST((d && d->labels[0] == 3 && d->classes == 4), descr + why(d));
  }
}

BOOST_AUTO_TEST_CASE(bad_npy_files_name_the_file_and_the_reason) {
  temp_dir dir;
  auto x = npy("<f4", "(2, 1)", bytes_of<float>({0, 1}));
  auto y = npy("<i8", "(2,)", bytes_of<int64_t>({0, 1}));
  auto xs = dir.file("x.npy") + ": ";
  auto ys = dir.file("y.npy") + ": ";
  auto cases = std::vector<std::tuple<std::string, std::string, std::string>>{
    {"PK\x03\x04 a zip", y, xs + "not a NumPy .npy file (bad magic)"},
    {npy("<f4", "(2, 1)", bytes_of<float>({0, 1}), false, 4), y,
     xs + ".npy format version 4.0 (versions 1 to 3 are read)"},
    {x.substr(0, 9), y, xs + "truncated: the header's length is cut"},
    {x.substr(0, 40), y, xs + "truncated: the header needs"},
    {std::string("\x93NUMPY\x01\x00\x08\x00[1, 2]  ", 18), y,
     xs + "the header is not a Python dict"},
    {npy("<f4", "(2, 1)", bytes_of<float>({0, 1}), true), y,
     xs + "the array is in Fortran order; save it with numpy.ascontiguousarray(a) first"},
    {npy(">f4", "(2, 1)", bytes_of<float>({0, 1})), y, xs + "big-endian data ('>f4')"},
    {npy("|O", "(2, 1)", bytes_of<float>({0, 1})), y, xs + "dtype '|O' is not read"},
    {npy("<i4", "(2, 1)", bytes_of<int32_t>({0, 1})), y,
     xs + "features must be float32, float64 or uint8"},
    {npy("<f4", "(2,)", bytes_of<float>({0, 1})), y,
     xs + "features of shape (2,) (expected (N, F), (N, H, W) or (N, H, W, C))"},
    {npy("<f4", "(0, 3)", ""), y, xs + "no samples (shape (0, 3))"},
    {npy("<f4", "(2, 1)", bytes_of<float>({0})), y,
     xs + "truncated: the data needs 8 bytes, the file has 4"},
    {x + "junk", y, xs + "more data than its shape announces"},
    {npy("<f4", "(100000, 100000)", ""), y, xs + "shape (100000, 100000) holds more than"},
    {npy("<f4", "(2, 1)", bytes_of<float>({0, 1.f / 0.f})), y,
     xs + "value 0 of sample 1 is not finite"},
    {x, npy("<i8", "(3,)", bytes_of<int64_t>({0, 1, 2})),
     ys + "3 labels for 2 samples in " + dir.file("x.npy")},
    {x, npy("<f4", "(2,)", bytes_of<float>({0, 1})), ys + "labels must be integers, not floats"},
    {x, npy("<i8", "(2, 1)", bytes_of<int64_t>({0, 1})),
     ys + "labels of shape (2, 1) (expected (N,))"},
    {x, npy("<i8", "(2,)", bytes_of<int64_t>({0, -1})),
     ys + "label of sample 1 is -1 (labels are 0..65535)"},
    {x, npy("<u8", "(2,)", bytes_of<uint64_t>({0, ~uint64_t{0}})),
     ys + "label of sample 1 is above 2^63"},
  };
  for (auto& [xf, yf, expected] : cases)
    BOOST_TEST(has(npy_error(dir, xf, yf), expected), expected);
  // A header key np.save never writes, and a missing one.
  std::string odd("\x93NUMPY\x01\x00", 8);
  std::string dict = "{'descr': '<f4', 'shape': (2, 1), 'extra': 1}\n";
  odd += static_cast<char>(dict.size());
  odd += '\0';
  BOOST_TEST(has(npy_error(dir, odd + dict, y), "unknown key 'extra'"));
  dict = "{'descr': '<f4', 'shape': (2, 1)}\n";
  odd[8] = static_cast<char>(dict.size());
  BOOST_TEST(has(npy_error(dir, odd + dict, y), "the header lacks 'fortran_order'"));
  // Missing files and folders.
  BOOST_TEST(has(why(load_npy(dir.file("none.npy"), dir.file("y.npy"))),
                 dir.file("none.npy") + ": no such file"));
  BOOST_TEST(has(why(load_npy(dir.path(), dir.file("y.npy"))),
                 "not a regular file"));
}

// A set of many .npy files: a glob (in name order) or a list, each part's
// features beside its labels, the samples one part after another; a part
// shaped, typed or counted unlike the others is named.
BOOST_AUTO_TEST_CASE(npy_parts_from_a_glob_or_a_list_read_as_one_set) {
  temp_dir dir;
  // Part k holds k + 1 samples of 2 values, value 10 * sample + j.
  uint8_t next = 0;
  for (int k = 0; k < 3; ++k) {
    std::vector<uint8_t> x, y;
    for (int i = 0; i <= k; ++i, ++next) {
      x.push_back(static_cast<uint8_t>(10 * next));
      x.push_back(static_cast<uint8_t>(10 * next + 1));
      y.push_back(next % 3);
    }
    auto n = std::to_string(k + 1);
    auto name = "x-" + std::to_string(k) + ".npy";
    write_file(dir.file(name),
               npy("|u1", "(" + n + ", 2)", std::string(x.begin(), x.end())));
    write_file(dir.file("y-" + std::to_string(k) + ".npy"),
               npy("|u1", "(" + n + ",)", std::string(y.begin(), y.end())));
  }
  auto config = [&](const std::string& train, const std::string& labels) {
    return R"({ "model": { "type": "softmax" },
      "data": { "format": "npy", "dir": ")"
           + dir.path() + R"(",
                "train": )"
           + train + R"(, "train_labels": )" + labels + R"(,
                "test": "x-0.npy", "test_labels": "y-0.npy" },
      "training": { "batch_size": 2, "epochs": 1 } })";
  };
  auto globbed = parse_run_config(config("\"x-*.npy\"", "\"y-*.npy\""),
                                  "cfg.json");
  BOOST_REQUIRE_MESSAGE(globbed, why(globbed));
  BOOST_TEST(globbed->data.train_files.size() == 3u);
  auto sets = load_datasets(globbed->data);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  const auto& train = sets->train;
  BOOST_TEST(train.count == 6);
  BOOST_TEST(train.labels == (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  auto values = train.features.to_floats();
  for (int i = 0; i < 6; ++i)
    BOOST_TEST(values[static_cast<size_t>(2 * i + 1)] * 255.f == 10.f * i + 1,
               boost::test_tools::tolerance(1e-3f));
  BOOST_TEST(train.source == dir.file("x-0.npy") + " and 2 more parts");
  // A list, globs in it too; a validation split across parts.
  auto listed = parse_run_config(config(R"(["x-2.npy", "x-[01].npy"])",
                                        R"(["y-2.npy", "y-[01].npy"])"),
                                 "cfg.json");
  BOOST_REQUIRE_MESSAGE(listed, why(listed));
  listed->data.validation_split = 0.5;
  sets = load_datasets(listed->data);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.count + sets->validation.count == 6);
  // What is wrong, and where.
  auto refused = [&](const std::string& features, const std::string& labels) {
    return why(parse_run_config(config(features, labels), "cfg.json"));
  };
  BOOST_TEST(refused("\"x-*.npy\"", "\"y-[01].npy\"")
             == "cfg.json: /data/train_labels: 2 label files for 3 feature "
                "files in /data/train (one of each per part, in the same "
                "order)");
  BOOST_TEST(refused("\"z-*.npy\"", "\"y-*.npy\"")
             == "cfg.json: /data/train: no dataset file matches "
                  + dir.file("z-*.npy"));
  BOOST_TEST(refused("[]", "\"y-*.npy\"")
             == "cfg.json: /data/train: expected a file, a glob or a list "
                "of them");
  write_file(dir.file("x-3.npy"), npy("|u1", "(1, 3)", "abc"));
  write_file(dir.file("y-3.npy"), npy("|u1", "(1,)", std::string(1, '\0')));
  auto cfg = parse_run_config(config("\"x-*.npy\"", "\"y-*.npy\""), "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, why(cfg));
  BOOST_TEST(why(load_datasets(cfg->data))
             == dir.file("x-3.npy") + ": samples of 1x3x1, but "
                  + dir.file("x-0.npy")
                  + " has samples of 1x2x1 (every part of a set is shaped "
                    "alike)");
  write_file(dir.file("x-3.npy"),
             npy("<f4", "(1, 2)", bytes_of<float>({0.5f, 1.5f})));
  BOOST_TEST(why(load_datasets(cfg->data))
             == dir.file("x-3.npy") + ": features stored as float32, but "
                  + dir.file("x-0.npy")
                  + " stores uint8 (every part of a set stores one type)");
}

BOOST_AUTO_TEST_CASE(npz_archives_stored_and_deflated) {
  temp_dir dir;
  auto x = npy("<f4", "(2, 3)", bytes_of<float>({1, 2, 3, 4, 5, 6}));
  auto y = npy("|u1", "(2,)", std::string("\x02\x00", 2));
  for (bool deflated : {false, true}) {
    write_file(dir.file("d.npz"),
               zip_of({{"x_train.npy", x}, {"y_train.npy", y}}, deflated));
    auto d = load_npz(dir.file("d.npz"), "x_train", "y_train");
    BOOST_REQUIRE_MESSAGE(d, why(d));
    BOOST_TEST(d->features.to_floats()
               == (std::vector<float>{1, 2, 3, 4, 5, 6}));
    BOOST_TEST(d->labels == (std::vector<int32_t>{2, 0}));
    BOOST_TEST(d->source == dir.file("d.npz") + ":x_train");
  }
  auto error = [&](const std::string& archive) {
    write_file(dir.file("d.npz"), archive);
    auto d = load_npz(dir.file("d.npz"), "x_train", "y_train");
    BOOST_TEST(!d);
    return why(d);
  };
  auto good = zip_of({{"x_train.npy", x}, {"y_train.npy", y}}, true);
  auto at = dir.file("d.npz") + ": ";
  BOOST_TEST(error(zip_of({{"x_train.npy", x}}, false))
             == at + "no member y_train.npy (it holds x_train.npy)");
  BOOST_TEST(error("not a zip at all")
             == at + "not a NumPy .npz (zip) file: no end of central directory");
  BOOST_TEST(has(error(good.substr(0, good.size() - 30)), at));
  auto flipped = good;
  flipped[55] = static_cast<char>(flipped[55] ^ 0x55); // inside x's data
  auto e = error(flipped);
  BOOST_TEST((has(e, "corrupt deflate data") || has(e, "CRC-32 mismatch")
              || has(e, "inflates")), e);
  auto method = zip_of({{"x_train.npy", x}, {"y_train.npy", y}}, false);
  method[8] = 12; // bzip2, in the local header
  auto central = method.find(std::string("\x50\x4b\x01\x02", 4));
  method[central + 10] = 12;
  BOOST_TEST(error(method) == at + "x_train.npy: compression method 12 "
                                   "(stored and deflate are read)");
  // A member that is no .npy is named with the archive.
  BOOST_TEST(error(zip_of({{"x_train.npy", "junk"}, {"y_train.npy", y}}, false))
             == at.substr(0, at.size() - 2) + ":x_train: not a NumPy .npy "
                                              "file (bad magic)");
}

// A deflated member inflated once into a cache folder and mapped from
// there (data.read "map", the default): the same samples as inflated into
// memory, read from the copy (the archive's member is not inflated
// again), and a corrupt member gives the same error and leaves no copy.
BOOST_AUTO_TEST_CASE(npz_deflated_members_through_a_cached_copy) {
  temp_dir dir;
  auto x = npy("<f4", "(2, 3)", bytes_of<float>({1, 2, 3, 4, 5, 6}));
  auto y = npy("|u1", "(2,)", std::string("\x02\x00", 2));
  auto good = zip_of({{"x_train.npy", x}, {"y_train.npy", y}}, true);
  write_file(dir.file("d.npz"), good);
  auto cache = dir.file("cache");
  auto memory = load_npz(dir.file("d.npz"), "x_train", "y_train");
  auto mapped = load_npz(dir.file("d.npz"), "x_train", "y_train",
                         target_kind::classes, true, cache);
  BOOST_REQUIRE_MESSAGE(mapped, why(mapped));
  BOOST_TEST(mapped->features.to_floats() == memory->features.to_floats());
  BOOST_TEST(mapped->labels == memory->labels);
  auto copies = [&] { return troupe::test::files_in(cache).size(); };
  BOOST_TEST(copies() == 2u); // x_train.npy and y_train.npy
  auto flipped = good;
  flipped[55] = static_cast<char>(flipped[55] ^ 0x55); // inside x's data
  write_file(dir.file("bad.npz"), flipped);
  auto bad_memory = load_npz(dir.file("bad.npz"), "x_train", "y_train");
  auto bad_mapped = load_npz(dir.file("bad.npz"), "x_train", "y_train",
                             target_kind::classes, true, cache);
  BOOST_REQUIRE(!bad_memory);
  BOOST_REQUIRE(!bad_mapped);
  BOOST_TEST(why(bad_mapped) == why(bad_memory));
  BOOST_TEST(copies() == 2u);
}

// Files written by NumPy itself (python3-numpy; skipped without it):
// np.save of float64 and int64, np.savez_compressed.
BOOST_AUTO_TEST_CASE(files_numpy_writes) {
  if (!troupe::test::python_has("numpy")) {
    BOOST_TEST_MESSAGE("python3-numpy is not installed: skipped");
    return;
  }
  temp_dir dir;
  auto script = "cd '" + dir.path() + "' && " + troupe::test::python()
                + " -c \"import numpy as np; "
                  "x = np.arange(12.0).reshape(3, 2, 2) / 10; "
                  "y = np.array([0, 4, 2]); "
                  "np.save('x.npy', x); np.save('y.npy', y); "
                  "np.savez_compressed('d.npz', x_train=x.astype(np.float32), "
                  "y_train=y.astype(np.int32))\"";
  BOOST_REQUIRE(std::system(script.c_str()) == 0);
  auto a = load_npy(dir.file("x.npy"), dir.file("y.npy"));
  auto b = load_npz(dir.file("d.npz"), "x_train", "y_train");
  for (auto* d : {&a, &b}) {
    BOOST_REQUIRE_MESSAGE(*d, why(*d));
    BOOST_TEST((*d)->height == 2);
    BOOST_TEST((*d)->width == 2);
    BOOST_TEST((*d)->features.to_floats()[11] == 1.1f,
               boost::test_tools::tolerance(1e-6f));
    BOOST_TEST((*d)->labels == (std::vector<int32_t>{0, 4, 2}));
    BOOST_TEST((*d)->classes == 5);
  }
}

BOOST_AUTO_TEST_CASE(csv_with_quotes_crlf_and_the_label_in_the_middle) {
  temp_dir dir;
  auto d = read_csv(dir, "\"a\",class,\"b, c\"\r\n1.5,2,-3\r\n\r\n\"4\",0,5e-1\r\n",
                    "class");
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->count == 2);
  BOOST_TEST(d->width == 2);
  BOOST_TEST(d->height == 1);
  BOOST_TEST(d->classes == 3);
  BOOST_TEST(d->features.to_floats()
             == (std::vector<float>{1.5f, -3.f, 4.f, 0.5f}));
  BOOST_TEST(d->labels == (std::vector<int32_t>{2, 0}));
  // No label column: every column is a feature (troupe-predict's input).
  d = read_csv(dir, "a,b,c\n1,2,3\n4,5,6\n", "");
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->count == 2);
  BOOST_TEST(d->width == 3);
  BOOST_TEST(d->labels.empty());
  BOOST_TEST(d->features.to_floats()[5] == 6.f);
}

BOOST_AUTO_TEST_CASE(bad_csv_files_name_the_file_line_and_column) {
  temp_dir dir;
  auto at = [&](int line) { return dir.file("d.csv") + ":" + std::to_string(line) + ": "; };
  auto cases = std::vector<std::pair<std::string, std::string>>{
    {"", dir.file("d.csv") + ": empty (expected a header row naming the columns)"},
    {"x,label\n", dir.file("d.csv") + ": a header but no samples"},
    {"x,y\n1,2\n", at(1) + "no column named \"label\" for the labels (data.label_column)"},
    {"label\n1\n", at(1) + "no feature columns beside the labels"},
    {"x,x,label\n1,2,0\n", at(1) + "column \"x\" is named twice"},
    {"x,label\n1,0\n2,1,3\n", at(3) + "3 fields, the header names 2"},
    {"x,label\n1,0\n\nabc,1\n", at(4) + "column \"x\": \"abc\" is not a number"},
    {"x,label\n,0\n", at(2) + "column \"x\" is empty"},
    {"x,label\n1,0.5\n", at(2) + "column \"label\": label \"0.5\" is not an integer"},
    {"x,label\n1,-2\n", at(2) + "column \"label\": label -2 (labels are 0..65535)"},
    {"x,label\n1,70000\n", at(2) + "column \"label\": label 70000"},
    {"x,label\nnan,1\n", at(2) + "column \"x\": \"nan\" is not finite"},
    {"x,label\n1e39,1\n", at(2) + "column \"x\": \"1e39\" is not finite"},
    {"x,label\n\"1,0\n", at(2) + "a quoted field is not closed"},
    {"x,label\n\"1\"2,0\n", at(2) + "text after a closing quote"},
    {"x,label\n1\"2,0\n", at(2) + "a quote inside an unquoted field"},
  };
  for (auto& [text, expected] : cases)
    BOOST_TEST(has(csv_error(dir, text), expected), expected + " <- " + text);
  BOOST_TEST(has(why(load_csv(dir.file("none.csv"), "label")), ": no such file"));
}

// Float targets (mean squared error, binary cross-entropy): (N,) or (N, K)
// arrays of any numeric type, and one or more CSV columns.
BOOST_AUTO_TEST_CASE(float_targets_from_npy_and_csv) {
  temp_dir dir;
  auto x = npy("<f4", "(2, 2)", bytes_of<float>({1, 2, 3, 4}));
  write_file(dir.file("x.npy"), x);
  auto targets = [&](const std::string& y, target_kind k) {
    write_file(dir.file("y.npy"), y);
    return load_npy(dir.file("x.npy"), dir.file("y.npy"), k);
  };
  auto d = targets(npy("<f8", "(2,)", bytes_of<double>({0.25, -7.5})),
                   target_kind::values);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->targets == (std::vector<float>{0.25f, -7.5f}));
  BOOST_TEST(d->labels.empty());
  BOOST_TEST(d->classes == 1);
  d = targets(npy("<f4", "(2, 3)", bytes_of<float>({1, 0, 1, 0, 0, 1})),
              target_kind::probabilities);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->classes == 3);
  BOOST_TEST(d->targets[5] == 1.f);
  d = targets(npy("<i8", "(2,)", bytes_of<int64_t>({1, 0})),
              target_kind::probabilities);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->targets == (std::vector<float>{1.f, 0.f}));
  // Samples picked out keep their targets together.
  std::vector<float> xs(4), ts(2);
  d = targets(npy("<f4", "(2, 2)", bytes_of<float>({1, 2, 3, 4})),
              target_kind::values);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  const uint32_t idx[] = {1};
  gather_batch(*d, idx, 1, xs.data(), nullptr, ts.data());
  BOOST_TEST(ts == (std::vector<float>{3.f, 4.f}));

  auto refused = [&](const std::string& y, target_kind k) {
    auto r = targets(y, k);
    BOOST_TEST(!r);
    return why(r);
  };
  auto y_at = dir.file("y.npy") + ": ";
  BOOST_TEST(refused(npy("<f4", "(2,)", bytes_of<float>({0.5f, 1.5f})),
                     target_kind::probabilities)
             == y_at
                  + "target 0 of sample 1 is 1.500000; binary "
                    "cross-entropy needs targets in [0, 1]");
  BOOST_TEST(refused(npy("<f4", "(2,)", bytes_of<float>({0.5f, NAN})),
                     target_kind::values)
             == y_at
                  + "target 0 of sample 1 is not finite (or too large "
                    "for float32)");
  BOOST_TEST(
    refused(npy("<f4", "(3,)", bytes_of<float>({1, 2, 3})), target_kind::values)
    == y_at + "3 targets for 2 samples in " + dir.file("x.npy"));
  BOOST_TEST(refused(npy("<f4", "(2, 1, 1)", bytes_of<float>({1, 2})),
                     target_kind::values)
             == y_at + "targets of shape (2, 1, 1) (expected (N,) or (N, K))");
  BOOST_TEST(refused(npy("<f4", "(2, 0)", ""), target_kind::values)
             == y_at + "shape (2, 0): 1 to 65536 targets per sample");
  // Class labels stay integers.
  BOOST_TEST(
    refused(npy("<f4", "(2,)", bytes_of<float>({0, 1})), target_kind::classes)
    == y_at + "labels must be integers, not floats");

  write_file(dir.file("d.csv"), "a,y1,b,y0\n1,0.5,2,-1\n3,1e-3,4,2\n");
  auto c = load_csv(dir.file("d.csv"), {"y0", "y1"}, target_kind::values);
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_TEST(c->width == 2);
  BOOST_TEST(c->features.to_floats()
             == (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  BOOST_TEST(c->classes == 2);
  BOOST_TEST(c->targets == (std::vector<float>{-1.f, 0.5f, 2.f, 1e-3f}));
  auto at = dir.file("d.csv") + ":";
  auto csv_refused = [&](const std::string& text,
                         std::vector<std::string> columns, target_kind k) {
    write_file(dir.file("d.csv"), text);
    auto r = load_csv(dir.file("d.csv"), columns, k);
    BOOST_TEST(!r);
    return why(r);
  };
  BOOST_TEST(csv_refused("a,y\n1,x\n", {"y"}, target_kind::values)
             == at + "2: column \"y\": target \"x\" is not a number");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"y"}, target_kind::probabilities)
             == at
                  + "2: column \"y\": target 2; binary cross-entropy "
                    "needs targets in [0, 1]");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"y", "z"}, target_kind::values)
             == at
                  + "1: no column named \"z\" for the targets "
                    "(data.label_column)");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"y", "y"}, target_kind::values)
             == at + "1: column \"y\" is named twice in data.label_column");
  BOOST_TEST(csv_refused("a,y\n1,2\n", {"a", "y"}, target_kind::values)
             == at + "1: no feature columns beside the labels");
}

// load_datasets: the config's loss says what the labels are; a validation
// split keeps each sample's targets.
BOOST_AUTO_TEST_CASE(float_targets_through_load_datasets) {
  temp_dir dir;
  std::string rows = "x,y\n";
  for (int i = 0; i < 10; ++i)
    rows += std::to_string(i) + "," + std::to_string(2 * i) + ".5\n";
  write_file(dir.file("train.csv"), rows);
  write_file(dir.file("test.csv"), "x,y\n1,2\n");
  data_config cfg;
  cfg.format = data_config::kind::csv;
  cfg.train_files = {dir.file("train.csv")};
  cfg.test_files = {dir.file("test.csv")};
  cfg.label_columns = {"y"};
  cfg.targets = target_kind::values;
  cfg.validation_split = 0.3;
  auto sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.count == 7);
  BOOST_TEST(sets->validation.count == 3);
  BOOST_TEST(sets->validation.classes == 1);
  for (auto* d : {&sets->train, &sets->validation})
    for (int64_t i = 0; i < d->count; ++i)
      BOOST_TEST(d->targets[static_cast<size_t>(i)]
                 == 2 * d->features.to_floats()[static_cast<size_t>(i)] + 0.5f);
  // A test set with another number of targets.
  write_file(dir.file("test.csv"), "x,y,z\n1,2,3\n");
  cfg.label_columns = {"y", "z"};
  write_file(dir.file("train.csv"), "x,y,z,w\n1,2,3,4\n2,3,4,5\n");
  cfg.validation_split = 0;
  sets = load_datasets(cfg);
  BOOST_TEST(!sets);
  BOOST_TEST(why(sets)
             == dir.file("test.csv")
                  + ": test samples are 1x1x1 with 2 "
                    "targets, but "
                  + dir.file("train.csv")
                  + " has training samples of 1x2x1 with 2 targets");
}

BOOST_AUTO_TEST_CASE(classes_come_from_the_data_or_from_the_config) {
  temp_dir dir;
  write_file(dir.file("train.csv"), "x,label\n1,0\n2,4\n");
  write_file(dir.file("test.csv"), "x,label\n1,6\n");
  data_config cfg;
  cfg.format = data_config::kind::csv;
  cfg.train_files = {dir.file("train.csv")};
  cfg.test_files = {dir.file("test.csv")};
  auto sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.classes == 7); // the test set's 6 counts too
  BOOST_TEST(sets->test.classes == 7);
  cfg.file_classes = 10;
  sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.classes == 10);
  cfg.file_classes = 5;
  BOOST_TEST(why(load_datasets(cfg))
             == dir.file("test.csv")
                  + ": label 6 of sample 0 is not below data.classes (5)");
  // One class in the data still makes a two-class problem.
  write_file(dir.file("test.csv"), "x,label\n1,0\n");
  write_file(dir.file("train.csv"), "x,label\n1,0\n");
  cfg.file_classes = 0;
  sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.classes == 2);
}

// Each process reads the features it needs: a training node not the test
// set's, the chief without workers not the training set's, unless the
// validation split it scores lies in it; labels and shapes always. .npy
// features are mapped where they lie, as the file stores them.
BOOST_AUTO_TEST_CASE(each_process_reads_the_features_it_needs) {
  temp_dir dir;
  write_file(dir.file("x.npy"),
             npy("|u1", "(3, 2)",
                 bytes_of<uint8_t>({0, 51, 102, 153, 204, 255})));
  write_file(dir.file("y.npy"),
             npy("|u1", "(3,)", bytes_of<uint8_t>({0, 1, 2})));
  data_config cfg;
  cfg.format = data_config::kind::npy;
  cfg.train_files = cfg.test_files = {dir.file("x.npy")};
  cfg.train_label_files = cfg.test_label_files = {dir.file("y.npy")};
  auto all = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(all, why(all));
  BOOST_TEST((all->train.features.stored() == feature_store::type::u8));
  BOOST_TEST(all->train.features.to_floats()[5] == 1.f);
  auto training = load_datasets(cfg, data_needs::training());
  BOOST_REQUIRE_MESSAGE(training, why(training));
  BOOST_TEST(training->train.features.rows() == 3);
  BOOST_TEST(training->test.features.empty());
  BOOST_TEST(training->test.labels == all->test.labels);
  BOOST_TEST(training->test.classes == 3);
  BOOST_TEST(!training->read.test);
  auto scoring = load_datasets(cfg, data_needs::scoring(cfg));
  BOOST_REQUIRE_MESSAGE(scoring, why(scoring));
  BOOST_TEST(scoring->train.features.empty());
  BOOST_TEST(scoring->train.count == 3);
  BOOST_TEST(scoring->test.features.rows() == 3);
  cfg.validation_split = 1.0 / 3;
  scoring = load_datasets(cfg, data_needs::scoring(cfg));
  BOOST_REQUIRE_MESSAGE(scoring, why(scoring));
  BOOST_TEST(scoring->validation.features.rows() == 1);
  BOOST_TEST(scoring->train.features.rows() == 2);
}

BOOST_AUTO_TEST_CASE(a_validation_split_holds_out_the_same_samples_everywhere) {
  temp_dir dir;
  // Sample i has feature i: where each sample went can be read back.
  std::string train = "x,label\n";
  for (int i = 0; i < 100; ++i)
    train += std::to_string(i) + "," + std::to_string(i % 3) + "\n";
  write_file(dir.file("train.csv"), train);
  write_file(dir.file("test.csv"), "x,label\n1,0\n2,1\n");
  data_config cfg;
  cfg.format = data_config::kind::csv;
  cfg.train_files = {dir.file("train.csv")};
  cfg.test_files = {dir.file("test.csv")};
  cfg.validation_split = 0.2;
  auto sets = load_datasets(cfg);
  BOOST_REQUIRE_MESSAGE(sets, why(sets));
  BOOST_TEST(sets->train.count == 80);
  BOOST_TEST(sets->validation.count == 20);
  BOOST_TEST(sets->validation.features.to_floats().size() == 20u);
  BOOST_TEST(sets->validation.classes == 3);
  BOOST_TEST(std::string{sets->watched_name()} == "validation");
  BOOST_TEST(&sets->watched() == &sets->validation);
  // Every sample is in exactly one set, with its own label; each set keeps
  // the file's order; a shuffle chose them (not the last 20).
  std::vector<int> seen(100, 0);
  for (auto* d : {&sets->train, &sets->validation}) {
    float last = -1;
    for (int64_t i = 0; i < d->count; ++i) {
      auto x = d->features.to_floats()[static_cast<size_t>(i)];
      BOOST_TEST(x > last);
      last = x;
      ++seen[static_cast<size_t>(x)];
      BOOST_TEST(d->labels[static_cast<size_t>(i)] == static_cast<int>(x) % 3);
    }
  }
  BOOST_TEST(std::count(seen.begin(), seen.end(), 1) == 100);
  BOOST_TEST(sets->validation.features.to_floats().front() < 80);
  // Another process loading the same files gets the same split; another
  // seed, another one.
  auto again = load_datasets(cfg);
  BOOST_REQUIRE(again);
  BOOST_TEST(again->validation.features.to_floats()
             == sets->validation.features.to_floats());
  cfg.validation_seed = 2;
  auto other = load_datasets(cfg);
  BOOST_REQUIRE(other);
  BOOST_TEST(other->validation.count == 20);
  BOOST_TEST(other->validation.features.to_floats()
             != sets->validation.features.to_floats());
  // A fraction that leaves a set empty is refused, naming the file.
  cfg.validation_split = 0.001;
  BOOST_TEST(why(load_datasets(cfg)).find(
               "data.validation_split 0.001000 of the 100 training samples of "
               + dir.file("train.csv") + " leaves no validation sample")
             != std::string::npos, why(load_datasets(cfg)));
  // Without a split the test set is watched.
  cfg.validation_split = 0;
  auto plain = load_datasets(cfg);
  BOOST_REQUIRE(plain);
  BOOST_TEST(plain->validation.count == 0);
  BOOST_TEST(std::string{plain->watched_name()} == "test");
}

BOOST_AUTO_TEST_SUITE_END()
