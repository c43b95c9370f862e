// How float buffers travel: as one raw block (host byte order,
// little-endian checked in protocol.hpp), not float by float, since CAF
// 0.17's element-wise vector<float> serialization is about ten times
// slower. protocol.hpp's inspect overloads of the payload-carrying messages
// use these.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "caf/binary_deserializer.hpp"
#include "caf/data_processor.hpp"
#include "caf/deserializer.hpp"
#include "caf/error.hpp"
#include "caf/serializer.hpp"
#include "runtime/params/buffer_pool.hpp"

namespace troupe {

namespace detail {

template <class Inspector>
constexpr bool is_wire
  = std::is_base_of<caf::data_processor<caf::serializer>, Inspector>::value
    || std::is_base_of<caf::data_processor<caf::deserializer>, Inspector>::value;

/// Whether `n` elements of at least `size` bytes each fit in what is left
/// of the message: a length field from a peer (a buggy or compromised
/// member) must not make us allocate more than it sent. CAF's binary
/// deserializer, BASP's, knows what is left; others are trusted.
inline caf::error check_fits(caf::deserializer& f, uint64_t n, size_t size) {
  auto* bd = dynamic_cast<caf::binary_deserializer*>(&f);
  if (bd != nullptr && n > bd->remaining() / size)
    return caf::make_error(caf::sec::end_of_stream);
  return {};
}

inline caf::error write_floats(caf::serializer& f, const float* data,
                               size_t n) {
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(float), const_cast<float*>(data)))
      return err;
  return f.end_sequence();
}

inline caf::error read_floats(caf::deserializer& f, std::vector<float>& v) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (auto err = check_fits(f, n, sizeof(float)))
    return err;
  v.resize(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(float), v.data()))
      return err;
  return f.end_sequence();
}

/// Reads a float sequence into a buffer from runtime/params/buffer_pool (big
/// messages reuse mapped pages instead of faulting fresh ones in).
inline caf::error read_pooled(caf::deserializer& f,
                              std::shared_ptr<std::vector<float>>& out) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (auto err = check_fits(f, n, sizeof(float)))
    return err;
  out = pooled_floats(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(float), out->data()))
      return err;
  return f.end_sequence();
}

/// Row ids travel as one raw block too (sparse pulls and pushes).
inline caf::error write_ids(caf::serializer& f,
                            const std::vector<uint64_t>& ids) {
  auto n = ids.size();
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(ids.size() * sizeof(uint64_t),
                               const_cast<uint64_t*>(ids.data())))
      return err;
  return f.end_sequence();
}

inline caf::error read_ids(caf::deserializer& f, std::vector<uint64_t>& ids) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (auto err = check_fits(f, n, sizeof(uint64_t)))
    return err;
  ids.resize(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(uint64_t), ids.data()))
      return err;
  return f.end_sequence();
}

/// Any vector of plain numbers as one raw block (a replica's copy of a
/// shard: clocks, the applied log).
template <class T>
caf::error write_raw(caf::serializer& f, const std::vector<T>& v) {
  static_assert(std::is_trivially_copyable<T>::value);
  auto n = v.size();
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), const_cast<T*>(v.data())))
      return err;
  return f.end_sequence();
}

template <class T>
caf::error read_raw(caf::deserializer& f, std::vector<T>& v) {
  static_assert(std::is_trivially_copyable<T>::value);
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (auto err = check_fits(f, n, sizeof(T)))
    return err;
  v.resize(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), v.data()))
      return err;
  return f.end_sequence();
}

inline caf::error write_float_vectors(caf::serializer& f,
                                      const std::vector<std::vector<float>>& v) {
  if (auto err = f(static_cast<uint64_t>(v.size())))
    return err;
  for (auto& x : v)
    if (auto err = write_floats(f, x.data(), x.size()))
      return err;
  return {};
}

inline caf::error read_float_vectors(caf::deserializer& f,
                                     std::vector<std::vector<float>>& v) {
  uint64_t n = 0;
  if (auto err = f(n))
    return err;
  if (auto err = check_fits(f, n, 1)) // each vector's length takes a byte
    return err;
  v.resize(n);
  for (auto& x : v)
    if (auto err = read_floats(f, x))
      return err;
  return {};
}

} // namespace detail

} // namespace troupe
