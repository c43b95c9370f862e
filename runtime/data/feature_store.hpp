// A dataset's features as the file stores them (bytes of images, float32
// or float64 values), in a mapped file or a buffer its reader filled, and
// turned into the model's float32 a batch at a time. Fashion-MNIST's
// training set is 47 MB this way, 188 MB as floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

class feature_store {
public:
  /// What one stored value is.
  enum class type : uint8_t {
    f32, ///< float32, taken as it is
    f64, ///< float64, narrowed to float32
    u8   ///< an unsigned byte (a pixel), scaled to [0, 1]
  };

  feature_store() = default;

  /// `rows` samples of `sample_values` values of type `t` from `first`
  /// on, in `owner` (a mapped file or a buffer), which the store keeps.
  feature_store(type t, const void* first, int64_t rows, size_t sample_values,
                std::shared_ptr<const void> owner);

  /// Values the caller computed, as they are.
  static feature_store of_floats(std::vector<float> values,
                                 size_t sample_values);
  /// Bytes the caller read, scaled to [0, 1] when read.
  static feature_store of_bytes(std::vector<uint8_t> values,
                                size_t sample_values);

  /// The parts' samples one after the other (a dataset of many files),
  /// sharing their bytes. Every part stores one type and sample size,
  /// and none is a subset.
  static feature_store concat(const std::vector<feature_store>& parts);

  /// The samples `rows` of this store, in that order, sharing its bytes:
  /// a validation split and what it leaves cost no copy.
  feature_store subset(std::vector<int64_t> rows) const;

  /// Whether it holds no values: a set whose features this process does
  /// not read (data_needs), or one with none.
  bool empty() const { return rows_ == 0; }
  int64_t rows() const { return rows_; }
  size_t sample_values() const { return sample_values_; }
  type stored() const { return type_; }
  /// The bytes the samples take as stored (a subset's own samples).
  uint64_t stored_bytes() const;

  /// Sample `i`'s values as float32, into out[0, sample_values).
  void read(int64_t i, float* out) const;
  /// Samples [first, first + n) into out, sample after sample.
  void read_range(int64_t first, int64_t n, float* out) const;
  /// Every sample, as floats: for small sets and tests.
  std::vector<float> to_floats() const;

  /// The floats themselves when they are stored as float32 in one block,
  /// in order (the click logs' numeric fields, which the click batch
  /// reads by row); else null.
  const float* contiguous_floats() const;

private:
  const unsigned char* at(int64_t i) const;
  size_t value_size() const {
    return type_ == type::f32 ? 4 : type_ == type::f64 ? 8 : 1;
  }

  /// One file's (or buffer's) samples, from sample `start` of the store.
  struct segment {
    int64_t start = 0;
    const unsigned char* first = nullptr;
  };

  type type_ = type::f32;
  const unsigned char* first_ = nullptr;
  int64_t rows_ = 0;
  size_t sample_values_ = 0;
  std::shared_ptr<const void> owner_;
  /// A store of several parts: where each begins (first_ is the first's;
  /// owner_ keeps them all). Null for one part.
  std::shared_ptr<const std::vector<segment>> segments_;
  /// A subset's rows in the bytes at first_; null when row i is sample i.
  std::shared_ptr<const std::vector<int64_t>> index_;
};

} // namespace troupe
