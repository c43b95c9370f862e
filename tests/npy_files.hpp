// Fashion-MNIST's bytes written as NumPy .npy files, as np.save writes
// them: the tests that train on .npy data read what troupe-train reads
// from Debian's IDX files, pixel for pixel.
#pragma once

#include <cstdio>
#include <fcntl.h>
#include <string>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <zlib.h>

#include "test_util.hpp"

namespace troupe::test {

inline const std::string fashion_mnist_dir =
  "/usr/share/datasets/fashion-mnist/";

/// The bytes of a gzipped IDX file after its header of `skip` bytes.
inline std::string idx_payload(const std::string& path, size_t skip) {
  gzFile f = gzopen(path.c_str(), "rb");
  BOOST_REQUIRE(f != nullptr);
  std::string out;
  char buf[1 << 16];
  int got;
  while ((got = gzread(f, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(got));
  gzclose(f);
  BOOST_REQUIRE(out.size() > skip);
  return out.substr(skip);
}

/// The .npy header of a uint8 array of `shape`, as np.save writes it.
inline std::string u1_npy_header(const std::string& shape) {
  return npy_header("|u1", shape);
}

/// Writes `text` to `path` and drops it from the page cache, as a file
/// that was not read lately is: its first reader reads it from the disk,
/// and its pages are charged to that reader's memory cgroup.
inline void write_uncached(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  BOOST_REQUIRE(fd >= 0);
  size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    BOOST_REQUIRE(n > 0);
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

/// Fashion-MNIST's training set `tiles` times over, as parts
/// train_x-00000.npy (60000, 28, 28) with train_y-00000.npy, ..., one per
/// tile, and the test set as test_x.npy and test_y.npy, in `folder`, none
/// of it in the page cache: a set of 47 MB per tile.
inline void write_tiled_fashion_mnist_npy(const std::string& folder,
                                          int tiles) {
  const auto& src = fashion_mnist_dir;
  auto pixels = u1_npy_header("(60000, 28, 28)")
                + idx_payload(src + "train-images-idx3-ubyte.gz", 16);
  auto labels = u1_npy_header("(60000,)")
                + idx_payload(src + "train-labels-idx1-ubyte.gz", 8);
  for (int k = 0; k < tiles; ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "%05d.npy", k);
    write_uncached(folder + "/train_x-" + name, pixels);
    write_uncached(folder + "/train_y-" + name, labels);
  }
  write_uncached(folder + "/test_x.npy",
                 u1_npy_header("(10000, 28, 28)")
                   + idx_payload(src + "t10k-images-idx3-ubyte.gz", 16));
  write_uncached(folder + "/test_y.npy",
                 u1_npy_header("(10000,)")
                   + idx_payload(src + "t10k-labels-idx1-ubyte.gz", 8));
}

/// A uint8 .npy file of `shape` (a Python tuple), as np.save writes it.
inline void write_u1_npy(const std::string& path, const std::string& shape,
                         const std::string& data) {
  write_file(path, u1_npy_header(shape) + data);
}

/// Fashion-MNIST as train_x.npy (60000, 28, 28), train_y.npy (60000,),
/// test_x.npy (10000, 28, 28) and test_y.npy (10000,) in `folder`; with
/// train_parts > 1, the training set as that many parts of unequal size,
/// train_x-00000.npy with train_y-00000.npy and so on, in order.
inline void write_fashion_mnist_npy(const std::string& folder,
                                    int train_parts = 1) {
  const auto& src = fashion_mnist_dir;
  auto pixels = idx_payload(src + "train-images-idx3-ubyte.gz", 16);
  auto labels = idx_payload(src + "train-labels-idx1-ubyte.gz", 8);
  if (train_parts <= 1) {
    write_u1_npy(folder + "/train_x.npy", "(60000, 28, 28)", pixels);
    write_u1_npy(folder + "/train_y.npy", "(60000,)", labels);
  }
  // Part k ends at sample 60000 * (k + 1)^2 / parts^2: small parts first.
  size_t first = 0;
  for (int k = 0; train_parts > 1 && k < train_parts; ++k) {
    auto end = static_cast<size_t>(60000.0 * (k + 1) * (k + 1)
                                   / (train_parts * train_parts));
    char name[32];
    std::snprintf(name, sizeof name, "%05d.npy", k);
    auto n = std::to_string(end - first);
    write_u1_npy(folder + "/train_x-" + name, "(" + n + ", 28, 28)",
                 pixels.substr(first * 784, (end - first) * 784));
    write_u1_npy(folder + "/train_y-" + name, "(" + n + ",)",
                 labels.substr(first, end - first));
    first = end;
  }
  write_u1_npy(folder + "/test_x.npy", "(10000, 28, 28)",
               idx_payload(src + "t10k-images-idx3-ubyte.gz", 16));
  write_u1_npy(folder + "/test_y.npy", "(10000,)",
               idx_payload(src + "t10k-labels-idx1-ubyte.gz", 8));
}

} // namespace troupe::test
