// Small IDX files (MNIST's format) for the readers' tests: images of 2x3
// pixels and their labels, as bytes to write plain or gzipped.
#pragma once

#include <cstdint>
#include <string>

namespace troupe::test {

/// `v` as 4 big-endian bytes, as IDX headers store their numbers.
inline std::string be32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i)
    s[static_cast<size_t>(i)] = static_cast<char>(v >> (24 - 8 * i));
  return s;
}

/// n images of 2x3 pixels whose pixel j of image i is 10*i + j.
inline std::string idx_images(uint32_t n) {
  std::string s = be32(0x803) + be32(n) + be32(2) + be32(3);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < 6; ++j)
      s += static_cast<char>(10 * i + j);
  return s;
}

/// n labels, i % 10.
inline std::string idx_labels(uint32_t n) {
  std::string s = be32(0x801) + be32(n);
  for (uint32_t i = 0; i < n; ++i)
    s += static_cast<char>(i % 10);
  return s;
}

} // namespace troupe::test
