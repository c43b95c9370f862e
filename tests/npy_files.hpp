// Fashion-MNIST's bytes written as NumPy .npy files, as np.save writes
// them: the tests that train on .npy data read what troupe-train reads
// from Debian's IDX files, pixel for pixel.
#pragma once

#include <string>

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

/// A uint8 .npy file of `shape` (a Python tuple), as np.save writes it.
inline void write_u1_npy(const std::string& path, const std::string& shape,
                         const std::string& data) {
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': "
                     + shape + ", }";
  dict += std::string(64 - (10 + dict.size() + 1) % 64, ' ') + "\n";
  std::string head = "\x93NUMPY\x01";
  head += '\0';
  head += static_cast<char>(dict.size() & 0xff);
  head += static_cast<char>(dict.size() >> 8);
  write_file(path, head + dict + data);
}

/// Fashion-MNIST as train_x.npy (60000, 28, 28), train_y.npy (60000,),
/// test_x.npy (10000, 28, 28) and test_y.npy (10000,) in `folder`.
inline void write_fashion_mnist_npy(const std::string& folder) {
  const auto& src = fashion_mnist_dir;
  write_u1_npy(folder + "/train_x.npy", "(60000, 28, 28)",
               idx_payload(src + "train-images-idx3-ubyte.gz", 16));
  write_u1_npy(folder + "/train_y.npy", "(60000,)",
               idx_payload(src + "train-labels-idx1-ubyte.gz", 8));
  write_u1_npy(folder + "/test_x.npy", "(10000, 28, 28)",
               idx_payload(src + "t10k-images-idx3-ubyte.gz", 16));
  write_u1_npy(folder + "/test_y.npy", "(10000,)",
               idx_payload(src + "t10k-labels-idx1-ubyte.gz", 8));
}

} // namespace troupe::test
