// How float buffers travel: as one raw block (host byte order,
// little-endian checked in shard_data_messages.hpp), not float by float,
// since CAF 0.17's element-wise vector<float> serialization is about ten
// times slower. The inspect overloads of the messages that carry floats
// (shard_data_messages.hpp, replica_protocol.hpp, shard_protocol.hpp) use
// these.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "caf/binary_deserializer.hpp"
#include "caf/data_processor.hpp"
#include "caf/deserializer.hpp"
#include "caf/error.hpp"
#include "caf/sec.hpp"
#include "caf/serializer.hpp"
#include "runtime/params/buffer_pool.hpp"

namespace troupe {

namespace detail {

template <class Inspector>
constexpr bool is_wire =
  std::is_base_of<caf::data_processor<caf::serializer>, Inspector>::value
  || std::is_base_of<caf::data_processor<caf::deserializer>, Inspector>::value;

/// Whether a wire inspector reads (a deserializer) rather than writes.
template <class Inspector>
constexpr bool is_reader =
  std::is_base_of<caf::data_processor<caf::deserializer>, Inspector>::value;

/// Makes alternative `index` of `v` its value (default-constructed); false
/// when `v` has no such alternative (a kind byte from a bad peer).
template <class Variant, size_t... Is>
bool emplace_by_index(Variant& v, size_t index, std::index_sequence<Is...>) {
  return ((index == Is ? (v.template emplace<Is>(), true) : false) || ...);
}

template <class Variant>
bool emplace_by_index(Variant& v, size_t index) {
  return emplace_by_index(
    v, index, std::make_index_sequence<std::variant_size_v<Variant>>{});
}

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

/// `n` plain numbers at `data` as one raw block.
template <class T>
caf::error write_raw(caf::serializer& f, const T* data, size_t n) {
  static_assert(std::is_trivially_copyable<T>::value);
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), const_cast<T*>(data)))
      return err;
  return f.end_sequence();
}

/// Any vector of plain numbers as one raw block: written...
template <class T>
caf::error raw(caf::serializer& f, std::vector<T>& v) {
  return write_raw(f, v.data(), v.size());
}

/// Reads a sequence of plain numbers as one raw block into the buffer
/// that `place(n)` gives for its `n` numbers, once `n` is checked against
/// what the message holds.
template <class T, class Place>
caf::error read_raw(caf::deserializer& f, Place&& place) {
  static_assert(std::is_trivially_copyable<T>::value);
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (auto err = check_fits(f, n, sizeof(T)))
    return err;
  T* data = place(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), data))
      return err;
  return f.end_sequence();
}

/// ...and read.
template <class T>
caf::error raw(caf::deserializer& f, std::vector<T>& v) {
  return read_raw<T>(f, [&](size_t n) {
    v.resize(n);
    return v.data();
  });
}

// Floats and row ids (sparse pulls and pushes), by name.
inline caf::error write_floats(caf::serializer& f, const float* data,
                               size_t n) {
  return write_raw(f, data, n);
}
inline caf::error read_floats(caf::deserializer& f, std::vector<float>& v) {
  return raw(f, v);
}
inline caf::error write_ids(caf::serializer& f,
                            const std::vector<uint64_t>& ids) {
  return write_raw(f, ids.data(), ids.size());
}
inline caf::error read_ids(caf::deserializer& f, std::vector<uint64_t>& ids) {
  return raw(f, ids);
}

/// Reads a float sequence into a buffer from runtime/params/buffer_pool (big
/// messages reuse mapped pages instead of faulting fresh ones in).
inline caf::error read_pooled(caf::deserializer& f,
                              std::shared_ptr<std::vector<float>>& out) {
  return read_raw<float>(f, [&](size_t n) {
    out = pooled_floats(n);
    return out->data();
  });
}

// -- raw forms, written once for both directions -----------------------------
//
// A message whose BASP form holds vectors of plain numbers (a shard's
// state, a replica's image, a checkpoint's rows) describes that form once
// as the parts of a raw_form, in order; the same description writes it
// with a serializer and reads it with a deserializer:
//
//   template <class Processor>
//   caf::error raw_form_of(Processor& f, row_chunk& x) {
//     return detail::raw_form{f}.fields(x.shard, x.table).raw(x.ids)
//       .lists(x.slots).done();
//   }

/// A vector shared and never changed (a push's gradients): written as
/// `raw` writes a vector (none: an empty one)...
template <class T>
caf::error shared(caf::serializer& f,
                  std::shared_ptr<const std::vector<T>>& v) {
  return v ? write_raw(f, v->data(), v->size()) : write_raw<T>(f, nullptr, 0);
}

/// ...and read into one of its own.
template <class T>
caf::error shared(caf::deserializer& f,
                  std::shared_ptr<const std::vector<T>>& v) {
  std::vector<T> read;
  if (auto err = raw(f, read))
    return err;
  v = std::make_shared<const std::vector<T>>(std::move(read));
  return {};
}

/// A list of such vectors: its length, then each as one raw block.
template <class T>
caf::error lists(caf::serializer& f, std::vector<std::vector<T>>& v) {
  if (auto err = f(static_cast<uint64_t>(v.size())))
    return err;
  for (auto& x : v)
    if (auto err = raw(f, x))
      return err;
  return {};
}

template <class T>
caf::error lists(caf::deserializer& f, std::vector<std::vector<T>>& v) {
  uint64_t n = 0;
  if (auto err = f(n))
    return err;
  if (auto err = check_fits(f, n, 1)) // each vector's length takes a byte
    return err;
  v.resize(n);
  for (auto& x : v)
    if (auto err = raw(f, x))
      return err;
  return {};
}

/// The parts of a message's raw form, applied in order until one fails.
/// `Processor`: a caf::serializer or caf::deserializer (or a type derived
/// from one).
template <class Processor>
class raw_form {
public:
  explicit raw_form(Processor& f) : f_(f) {}

  /// Fields CAF writes and reads itself (numbers, strings, their vectors).
  template <class... Ts>
  raw_form& fields(Ts&... xs) {
    if (!err_)
      err_ = f_(xs...);
    return *this;
  }

  template <class T>
  raw_form& raw(std::vector<T>& v) {
    if (!err_)
      err_ = detail::raw(f_, v);
    return *this;
  }

  template <class T>
  raw_form& shared(std::shared_ptr<const std::vector<T>>& v) {
    if (!err_)
      err_ = detail::shared(f_, v);
    return *this;
  }

  template <class T>
  raw_form& lists(std::vector<std::vector<T>>& v) {
    if (!err_)
      err_ = detail::lists(f_, v);
    return *this;
  }

  /// A part that is a message of its own, in its own form.
  template <class T>
  raw_form& part(T& x) {
    if (!err_)
      err_ = inspect(f_, x);
    return *this;
  }

  caf::error done() { return std::move(err_); }

private:
  Processor& f_;
  caf::error err_;
};

} // namespace detail

} // namespace troupe
