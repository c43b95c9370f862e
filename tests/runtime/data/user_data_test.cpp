// NumPy .npy and CSV datasets (load_npy, load_csv, and load_datasets with
// data.classes): good files in every shape and type the readers take, and
// bad files, each refused with the file, the place and the reason.
#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>

#include "runtime/base/errc.hpp"
#include "runtime/config/config.hpp"
#include "runtime/data/user_files.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(user_data)

BOOST_AUTO_TEST_CASE(npy_float_features_and_int64_labels) {
  temp_dir dir;
  auto d = read_npy(dir,
                    npy("<f4", "(2, 3)", bytes_of<float>({1, 2, 3, 4, 5, -6})),
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
  auto d = read_npy(dir,
                    npy("|u1", "(1, 2, 2)", std::string("\x00\xff\x33\x66", 4)),
                    npy("|u1", "(1,)", std::string(1, '\x01')));
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->height == 2);
  BOOST_TEST(d->width == 2);
  BOOST_TEST(d->channels == 1);
  BOOST_TEST(d->features.to_floats()[1] == 1.f);
  BOOST_TEST(d->features.to_floats()[2] == 0.2f,
             boost::test_tools::tolerance(1e-6f));
  // (N, H, W, C), float64, int32 labels, a version 2 header.
  d = read_npy(dir,
               npy("<f8", "(2, 1, 2, 3)",
                   bytes_of<double>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
                   false, 2),
               npy("<i4", "(2,)", bytes_of<int32_t>({1, 2})));
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_TEST(d->height == 1);
  BOOST_TEST(d->width == 2);
  BOOST_TEST(d->channels == 3);
  BOOST_TEST(d->features.to_floats()[11] == 11.f);
  BOOST_TEST(d->classes == 3);
  // Every integer label type.
  for (auto [descr, raw] : std::vector<std::pair<std::string, std::string>>{
         {"|i1", bytes_of<int8_t>({3})},
         {"<i2", bytes_of<int16_t>({3})},
         {"<u2", bytes_of<uint16_t>({3})},
         {"<u4", bytes_of<uint32_t>({3})},
         {"<u8", bytes_of<uint64_t>({3})},
         {"=i8", bytes_of<int64_t>({3})}}) {
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
     xs
       + "the array is in Fortran order; save it with "
         "numpy.ascontiguousarray(a) first"},
    {npy(">f4", "(2, 1)", bytes_of<float>({0, 1})), y,
     xs + "big-endian data ('>f4')"},
    {npy("|O", "(2, 1)", bytes_of<float>({0, 1})), y,
     xs + "dtype '|O' is not read"},
    {npy("<i4", "(2, 1)", bytes_of<int32_t>({0, 1})), y,
     xs + "features must be float32, float64 or uint8"},
    {npy("<f4", "(2,)", bytes_of<float>({0, 1})), y,
     xs
       + "features of shape (2,) (expected (N, F), (N, H, W) or (N, H, W, C))"},
    {npy("<f4", "(0, 3)", ""), y, xs + "no samples (shape (0, 3))"},
    {npy("<f4", "(2, 1)", bytes_of<float>({0})), y,
     xs + "truncated: the data needs 8 bytes, the file has 4"},
    {x + "junk", y, xs + "more data than its shape announces"},
    {npy("<f4", "(100000, 100000)", ""), y,
     xs + "shape (100000, 100000) holds more than"},
    {npy("<f4", "(2, 1)", bytes_of<float>({0, 1.f / 0.f})), y,
     xs + "value 0 of sample 1 is not finite"},
    {x, npy("<i8", "(3,)", bytes_of<int64_t>({0, 1, 2})),
     ys + "3 labels for 2 samples in " + dir.file("x.npy")},
    {x, npy("<f4", "(2,)", bytes_of<float>({0, 1})),
     ys + "labels must be integers, not floats"},
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
  BOOST_TEST(
    has(npy_error(dir, odd + dict, y), "the header lacks 'fortran_order'"));
  // Missing files and folders.
  BOOST_TEST(has(why(load_npy(dir.file("none.npy"), dir.file("y.npy"))),
                 dir.file("none.npy") + ": no such file"));
  BOOST_TEST(
    has(why(load_npy(dir.path(), dir.file("y.npy"))), "not a regular file"));
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
             == at
                  + "not a NumPy .npz (zip) file: no end of central directory");
  BOOST_TEST(has(error(good.substr(0, good.size() - 30)), at));
  auto flipped = good;
  flipped[55] = static_cast<char>(flipped[55] ^ 0x55); // inside x's data
  auto e = error(flipped);
  BOOST_TEST((has(e, "corrupt deflate data") || has(e, "CRC-32 mismatch")
              || has(e, "inflates")),
             e);
  auto method = zip_of({{"x_train.npy", x}, {"y_train.npy", y}}, false);
  method[8] = 12; // bzip2, in the local header
  auto central = method.find(std::string("\x50\x4b\x01\x02", 4));
  method[central + 10] = 12;
  BOOST_TEST(error(method)
             == at
                  + "x_train.npy: compression method 12 "
                    "(stored and deflate are read)");
  // A member that is no .npy is named with the archive.
  BOOST_TEST(error(zip_of({{"x_train.npy", "junk"}, {"y_train.npy", y}}, false))
             == at.substr(0, at.size() - 2)
                  + ":x_train: not a NumPy .npy "
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

BOOST_AUTO_TEST_SUITE_END()
