#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/base/errc.hpp"
#include "idx_files.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

std::string error_text(const caf::expected<dataset>& d) {
  BOOST_REQUIRE(!d);
  return describe(d.error());
}

} // namespace

BOOST_AUTO_TEST_SUITE(dataset)

BOOST_AUTO_TEST_CASE(idx_plain_and_gzipped_read_the_same) {
  temp_dir tmp;
  test::write_file(tmp.file("img"), idx_images(4));
  test::write_file(tmp.file("lbl"), idx_labels(4));
  write_gz(tmp.file("img.gz"), idx_images(4));
  write_gz(tmp.file("lbl.gz"), idx_labels(4));
  auto plain = load_idx(tmp.file("img"), tmp.file("lbl"));
  auto gz = load_idx(tmp.file("img.gz"), tmp.file("lbl.gz"));
  BOOST_REQUIRE_MESSAGE(plain, troupe::test::why(plain));
  BOOST_REQUIRE_MESSAGE(gz, troupe::test::why(gz));
  BOOST_TEST(plain->count == 4);
  BOOST_TEST(plain->height == 2);
  BOOST_TEST(plain->width == 3);
  BOOST_TEST(plain->features.to_floats()[6 * 2 + 5] == 25.f / 255.f,
             boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(plain->labels[3] == 3);
  BOOST_TEST(plain->features.to_floats() == gz->features.to_floats());
  BOOST_TEST(plain->labels == gz->labels);
}

// Pixels stay bytes, scaled when read: a plain IDX file is mapped where
// it lies (its pages are the file's; removing the file leaves the mapping
// readable), a gzipped one inflated into bytes; without its features a
// set keeps its shape and labels.
BOOST_AUTO_TEST_CASE(idx_pixels_stay_bytes_and_a_plain_file_is_mapped) {
  temp_dir tmp;
  test::write_file(tmp.file("img"), idx_images(4));
  test::write_file(tmp.file("lbl"), idx_labels(4));
  write_gz(tmp.file("img.gz"), idx_images(4));
  auto plain = load_idx(tmp.file("img"), tmp.file("lbl"));
  auto gz = load_idx(tmp.file("img.gz"), tmp.file("lbl"));
  BOOST_REQUIRE_MESSAGE(plain, troupe::test::why(plain));
  BOOST_REQUIRE_MESSAGE(gz, troupe::test::why(gz));
  for (auto* d : {&*plain, &*gz}) {
    BOOST_TEST((d->features.stored() == feature_store::type::u8));
    BOOST_TEST(d->features.stored_bytes() == 4u * 6u);
    BOOST_TEST(d->features.contiguous_floats() == nullptr);
  }
  ::unlink(tmp.file("img").c_str());
  std::vector<float> x(6);
  plain->features.read(3, x.data());
  BOOST_TEST(x[5] == 35.f / 255.f, boost::test_tools::tolerance(1e-6f));
  // The header and the labels alone.
  auto shape = load_idx(tmp.file("img.gz"), tmp.file("lbl"), 10, false);
  BOOST_REQUIRE_MESSAGE(shape, troupe::test::why(shape));
  BOOST_TEST(shape->count == 4);
  BOOST_TEST(shape->sample_size() == 6u);
  BOOST_TEST(shape->features.empty());
  BOOST_TEST(shape->labels == gz->labels);
}

// A subset names rows of the bytes beneath it, a subset of a subset too.
BOOST_AUTO_TEST_CASE(subsets_read_the_rows_they_name) {
  std::vector<uint8_t> bytes;
  for (uint8_t i = 0; i < 10; ++i)
    bytes.insert(bytes.end(), {i, static_cast<uint8_t>(i + 100)});
  auto all = feature_store::of_bytes(bytes, 2);
  BOOST_TEST(all.rows() == 10);
  auto odd = all.subset({1, 3, 5, 7, 9});
  auto some = odd.subset({4, 0});
  BOOST_TEST(some.rows() == 2);
  BOOST_TEST(some.stored_bytes() == 4u);
  std::vector<float> x(4);
  some.read_range(0, 2, x.data());
  BOOST_TEST(x[0] * 255.f == 9.f, boost::test_tools::tolerance(1e-4f));
  BOOST_TEST(x[1] * 255.f == 109.f, boost::test_tools::tolerance(1e-4f));
  BOOST_TEST(x[2] * 255.f == 1.f, boost::test_tools::tolerance(1e-4f));
  BOOST_TEST(feature_store{}.subset({}).empty());
  auto floats = feature_store::of_floats({1.f, 2.f, 3.f, 4.f}, 2);
  BOOST_TEST(floats.contiguous_floats() != nullptr);
  BOOST_TEST(floats.subset({1}).contiguous_floats() == nullptr);
  BOOST_TEST(floats.subset({1}).to_floats() == (std::vector<float>{3.f, 4.f}));
}

BOOST_AUTO_TEST_CASE(idx_errors_name_file_and_problem) {
  temp_dir tmp;
  auto img = tmp.file("img"), lbl = tmp.file("lbl");
  test::write_file(lbl, idx_labels(4));
  // truncated pixel data
  test::write_file(img, idx_images(4).substr(0, 16 + 20));
  BOOST_TEST(error_text(load_idx(img, lbl))
             == img
                  + ": truncated: the pixel data needs 24 bytes, file has 20");
  // truncated gzip stream
  {
    write_gz(img + ".gz", idx_images(4));
    std::string gz;
    std::ifstream in{img + ".gz", std::ios::binary};
    gz.assign(std::istreambuf_iterator<char>{in}, {});
    test::write_file(img + ".cut.gz", gz.substr(0, gz.size() / 2));
    auto d = load_idx(img + ".cut.gz", lbl);
    BOOST_TEST(!d);
    BOOST_TEST((d.error() == errc::bad_format));
  }
  // wrong magic: the label file given as images
  BOOST_TEST(error_text(load_idx(lbl, lbl)).find(lbl + ": truncated")
             == 0); // 8-byte file, 16-byte header
  test::write_file(img, idx_labels(4) + std::string(8, '\0'));
  BOOST_TEST(error_text(load_idx(img, lbl))
             == img + ": not an IDX image file (magic 0x801, expected 0x803)");
  // count mismatch
  test::write_file(img, idx_images(5));
  BOOST_TEST(error_text(load_idx(img, lbl))
             == lbl + ": has 4 labels but " + img + " has 5 images");
  // label out of range
  test::write_file(img, idx_images(4));
  std::string bad = idx_labels(4);
  bad[9] = 12;
  test::write_file(lbl, bad);
  BOOST_TEST(error_text(load_idx(img, lbl))
             == lbl + ": label 12 at index 1 is not below 10");
  // missing file
  auto d = load_idx(tmp.file("nope"), lbl);
  BOOST_TEST((d.error() == errc::file_not_found));
  BOOST_TEST(error_text(d) == tmp.file("nope") + ": no such file");
}

BOOST_AUTO_TEST_CASE(cifar10_binary_round_trip_and_truncation) {
  temp_dir tmp;
  std::string records;
  for (int r = 0; r < 3; ++r) {
    records += static_cast<char>(r + 1);
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p)
        records += static_cast<char>((p + c * 7 + r) % 256);
  }
  test::write_file(tmp.file("b1.bin"), records);
  test::write_file(tmp.file("b2.bin"), records.substr(0, 3073));
  auto d = load_cifar10({tmp.file("b1.bin"), tmp.file("b2.bin")});
  BOOST_REQUIRE_MESSAGE(d, troupe::test::why(d));
  BOOST_TEST(d->count == 4);
  BOOST_TEST(d->channels == 3);
  BOOST_TEST(d->labels == (std::vector<int32_t>{1, 2, 3, 1}));
  // record 1, pixel 5, channel G (c = 1): (5 + 7 + 1) % 256 = 13; NHWC
  BOOST_TEST(d->features.to_floats()[3072 + 5 * 3 + 1] == 13.f / 255.f,
             boost::test_tools::tolerance(1e-6f));
  test::write_file(tmp.file("cut.bin"), records.substr(0, 3073 + 100));
  auto cut = load_cifar10({tmp.file("cut.bin")});
  BOOST_TEST(error_text(cut)
             == tmp.file("cut.bin")
                  + ": truncated CIFAR-10 record 1 (100 of 3073 bytes)");
}

BOOST_AUTO_TEST_CASE(idx_headers_are_checked_before_anything_is_allocated) {
  temp_dir tmp;
  auto lbl = tmp.file("lbl");
  test::write_file(lbl, idx_labels(4));
  auto claim = [&](uint32_t n, uint32_t h, uint32_t w) {
    auto img = tmp.file("claim");
    test::write_file(img, be32(0x803) + be32(n) + be32(h) + be32(w)
                            + std::string(24, '\1'));
    return error_text(load_idx(img, lbl));
  };
  // 0xFFFFFFFF images of 28x28 (an abort once), 4096x4096 images (idem).
  auto why = claim(0xFFFFFFFFu, 28, 28);
  BOOST_TEST(why.find("announces 4294967295 images of 28x28 (more than "
                      "1073741824 pixels)")
               != std::string::npos,
             why);
  why = claim(100, 4096, 4096);
  BOOST_TEST(why.find("announces 100 images of 4096x4096") != std::string::npos,
             why);
  // Plausible claims the file does not back: refused, without allocating
  // the claim (the slices read only what is there).
  why = claim(1000000, 28, 28);
  BOOST_TEST(why.find("truncated: the pixel data needs 784000000 bytes, file "
                      "has 24")
               != std::string::npos,
             why);
  why = claim(0, 28, 28);
  BOOST_TEST(why.find("holds no images") != std::string::npos, why);
  // More data than announced.
  auto img = tmp.file("long");
  test::write_file(img, idx_images(4) + "xx");
  why = error_text(load_idx(img, lbl));
  BOOST_TEST(
    why.find("more data than its header announces") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(a_gzip_crc_error_is_caught_even_where_reading_stops) {
  temp_dir tmp;
  auto img = tmp.file("img.gz"), lbl = tmp.file("lbl.gz");
  // 4000 images of noise: a compressed stream far longer than zlib's
  // input buffer, so the pixels are all read before the trailer is.
  std::string images = be32(0x803) + be32(4000) + be32(2) + be32(3);
  uint32_t x = 1;
  for (int i = 0; i < 4000 * 6; ++i) {
    x = x * 1664525u + 1013904223u;
    images += static_cast<char>(x >> 24);
  }
  write_gz(img, images);
  write_gz(lbl, idx_labels(4000));
  BOOST_REQUIRE(load_idx(img, lbl));
  // Flip a bit of the CRC-32 in the trailer (the 8 bytes before the end):
  // the data decompresses intact, only the end of the stream can tell.
  // zlib notices while the last pixels are read, or the read past them
  // does; either way the file is refused. The same for the labels.
  auto flip_crc = [](const std::string& path) {
    std::ifstream in{path, std::ios::binary};
    std::string gz{std::istreambuf_iterator<char>{in}, {}};
    gz[gz.size() - 8] = static_cast<char>(gz[gz.size() - 8] ^ 1);
    test::write_file(path, gz);
  };
  flip_crc(img);
  auto why = error_text(load_idx(img, lbl));
  BOOST_TEST(why.find(img + ": corrupt compressed data") != std::string::npos,
             why);
  write_gz(img, images);
  flip_crc(lbl);
  why = error_text(load_idx(img, lbl));
  BOOST_TEST(why.find(lbl + ": corrupt compressed data") != std::string::npos,
             why);
  // A FIFO is not read (it would block).
  auto fifo = tmp.file("fifo");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  why = error_text(load_idx(fifo, lbl));
  BOOST_TEST(why.find("not a regular file") != std::string::npos, why);
  why = error_text(load_cifar10({fifo}));
  BOOST_TEST(why.find("not a regular file") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(test_samples_must_be_shaped_like_training_samples) {
  temp_dir tmp;
  // 2x3 training images, 3x2 test images (20x20 next to 28x28 crashed).
  test::write_file(tmp.file("train-img"), idx_images(4));
  test::write_file(tmp.file("train-lbl"), idx_labels(4));
  auto test_images = be32(0x803) + be32(4) + be32(3) + be32(2)
                     + std::string(24, '\1');
  test::write_file(tmp.file("test-img"), test_images);
  test::write_file(tmp.file("test-lbl"), idx_labels(4));
  data_config cfg;
  cfg.format = data_config::kind::idx;
  cfg.train_images = tmp.file("train-img");
  cfg.train_labels = tmp.file("train-lbl");
  cfg.test_images = tmp.file("test-img");
  cfg.test_labels = tmp.file("test-lbl");
  cfg.file_classes = 10; // the labels are 0..3
  auto d = load_datasets(cfg);
  BOOST_REQUIRE(!d);
  auto why = describe(d.error());
  BOOST_TEST(why.find(tmp.file("test-img")
                      + ": test samples are 3x2x1 in 10 "
                        "classes, but "
                      + tmp.file("train-img")
                      + " has training samples of 2x3x1 in 10")
               != std::string::npos,
             why);
}

BOOST_AUTO_TEST_CASE(epoch_order_is_a_seeded_permutation) {
  auto a = epoch_order(1000, 7, 0);
  auto b = epoch_order(1000, 7, 0);
  auto c = epoch_order(1000, 7, 1);
  auto d = epoch_order(1000, 8, 0);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  BOOST_TEST(a != d);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i)
    BOOST_REQUIRE(sorted[i] == i);
  BOOST_TEST(epoch_order(0, 1, 0).empty());
}

// A block shuffle: a permutation whose every block of consecutive samples
// is visited in one stretch, the blocks and the samples inside each in a
// seeded order; the last block may be shorter; a block of 1 is the
// per-sample shuffle.
BOOST_AUTO_TEST_CASE(a_block_shuffle_visits_each_block_in_one_stretch) {
  const size_t n = 1000, block = 64;
  auto a = epoch_order(n, 7, 0, block);
  BOOST_TEST(a == epoch_order(n, 7, 0, block));
  BOOST_TEST(a != epoch_order(n, 7, 1, block));
  BOOST_TEST(epoch_order(n, 7, 3, 1) == epoch_order(n, 7, 3));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < n; ++i)
    BOOST_REQUIRE(sorted[i] == i);
  // Stretches of one block each, of 64 samples but the last block's 40.
  std::vector<size_t> stretch_of_block(n / block + 1, 0);
  size_t at = 0, stretches = 0;
  bool inner_shuffled = false;
  while (at < n) {
    auto b = a[at] / block;
    size_t len = 0;
    while (at + len < n && a[at + len] / block == b) {
      inner_shuffled |= a[at + len] != b * block + len;
      ++len;
    }
    BOOST_TEST(len == (b == n / block ? n % block : block));
    ++stretch_of_block[b];
    ++stretches;
    at += len;
  }
  BOOST_TEST(stretches == n / block + 1);
  for (auto s : stretch_of_block)
    BOOST_TEST(s == 1u);
  BOOST_TEST(inner_shuffled);
  BOOST_TEST(a[0] / block != 0u); // the blocks are shuffled too (seed 7)
}

BOOST_AUTO_TEST_CASE(synthetic_is_deterministic_and_labelled) {
  auto a = make_synthetic(100, 1, 5, 1, 3, 0.1, 1, 2);
  auto b = make_synthetic(100, 1, 5, 1, 3, 0.1, 1, 2);
  BOOST_TEST(a.features.to_floats() == b.features.to_floats());
  BOOST_TEST(a.labels == b.labels);
  for (auto l : a.labels)
    BOOST_REQUIRE(l >= 0 && l < 3);
  for (auto x : a.features.to_floats())
    BOOST_REQUIRE(x >= 0.f && x <= 1.f);
}

BOOST_AUTO_TEST_CASE(fashion_mnist_from_debian_loads) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  auto d = load_idx(dir + "t10k-images-idx3-ubyte.gz",
                    dir + "t10k-labels-idx1-ubyte.gz");
  BOOST_REQUIRE_MESSAGE(d, troupe::test::why(d));
  BOOST_TEST(d->count == 10000);
  BOOST_TEST(d->height == 28);
  BOOST_TEST(d->width == 28);
  std::vector<int> per_class(10);
  for (auto l : d->labels)
    ++per_class[static_cast<size_t>(l)];
  for (int n : per_class)
    BOOST_TEST(n == 1000); // Fashion-MNIST's test set is balanced
}

BOOST_AUTO_TEST_SUITE_END()
