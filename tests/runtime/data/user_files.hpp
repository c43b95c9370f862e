// What the suite user_data's files share (user_data_test.cpp,
// user_data_more_test.cpp): .npy files and zip archives as NumPy writes
// them, and the readers' answers and errors for files written to a
// folder.
#pragma once

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <string>
#include <utility>
#include <vector>
#include <zlib.h>

#include "runtime/config/config.hpp"
#include "runtime/data/dataset.hpp"
#include "test_util.hpp"

namespace troupe::test {

/// A CSV data set of `train` and `test` text, written into `dir`.
inline data_config csv_set(const temp_dir& dir, const std::string& train,
                           const std::string& test) {
  write_file(dir.file("train.csv"), train);
  write_file(dir.file("test.csv"), test);
  data_config cfg;
  cfg.format = data_config::kind::csv;
  cfg.train_files = {dir.file("train.csv")};
  cfg.test_files = {dir.file("test.csv")};
  return cfg;
}

/// An .npy file as np.save writes it (test_util.hpp's npy_header).
inline std::string npy(const std::string& descr, const std::string& shape,
                       const std::string& data, bool fortran = false,
                       int major = 1) {
  return troupe::test::npy_header(descr, shape, fortran, major) + data;
}

template <class T>
inline std::string bytes_of(std::initializer_list<T> values) {
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
inline std::string
zip_of(const std::vector<std::pair<std::string, std::string>>& members,
       bool deflated) {
  auto u16 = [](uint32_t v) {
    return bytes_of<uint16_t>({static_cast<uint16_t>(v)});
  };
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
inline caf::expected<dataset>
read_npy(const temp_dir& dir, const std::string& x, const std::string& y) {
  write_file(dir.file("x.npy"), x);
  write_file(dir.file("y.npy"), y);
  return load_npy(dir.file("x.npy"), dir.file("y.npy"));
}

inline std::string npy_error(const temp_dir& dir, const std::string& x,
                             const std::string& y) {
  auto d = read_npy(dir, x, y);
  BOOST_TEST(!d);
  return why(d);
}

inline caf::expected<dataset> read_csv(const temp_dir& dir,
                                       const std::string& text,
                                       const std::string& label = "label") {
  write_file(dir.file("d.csv"), text);
  return load_csv(dir.file("d.csv"), label);
}

inline std::string csv_error(const temp_dir& dir, const std::string& text,
                             const std::string& label = "label") {
  auto d = read_csv(dir, text, label);
  BOOST_TEST(!d);
  return why(d);
}

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace troupe::test
