// One batch of a click model whose embedding table is spread over shards:
// which rows to ask each shard for (each distinct row once, placed by
// shard_of_row), the MLP's inputs once the rows are in (numeric fields,
// then each categorical field's mean-pooled row), and, from the gradient
// of those inputs, each shard's row gradients in the order of its ids.
//
// A worker plans its leased batch, pulls ids(s) from every shard s,
// hands each answer to set_rows, trains the MLP on inputs(), and pushes
// row_grads(s) back; the chief plans its evaluation batches the same way.
// With one shard and a local table it is the one-process click model.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "models/embedding_bag.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/sparse/id_index.hpp"

namespace troupe {

/// The click probability of a sample from the MLP's two logits (softmax
/// of (l0, l1) is sigmoid(l1 - l0)).
inline double click_probability(const float* logits) {
  return 1.0
         / (1.0
            + std::exp(static_cast<double>(logits[0])
                       - static_cast<double>(logits[1])));
}

class click_batch {
public:
  /// Samples of `numeric` numeric and `fields` categorical fields, rows of
  /// `dim` floats spread over `shards` shards.
  click_batch(int numeric, int fields, int dim, int32_t shards);

  /// Plans samples idx[0..n) of `logs`, whose numeric fields are the rows
  /// of `numeric` (count x numeric floats; the dataset's images).
  void plan(const click_data& logs, const float* numeric, const uint32_t* idx,
            int n);

  int samples() const { return n_; }
  /// The shards that hold at least one of the batch's rows: the only
  /// ones its pulls and pushes go to.
  std::vector<int32_t> holding() const;
  int32_t shards() const { return static_cast<int32_t>(ids_.size()); }
  /// The distinct rows of the batch that shard s holds, in the order its
  /// answer must hold them.
  const std::vector<uint64_t>& ids(int32_t s) const {
    return ids_[static_cast<size_t>(s)];
  }
  /// Distinct rows of the batch, all shards together.
  size_t rows() const { return lookup_.unique.size(); }

  /// Shard s's rows as pulled: ids(s).size() x dim floats.
  void set_rows(int32_t s, const float* rows);

  /// The MLP's inputs, samples() x input_size(), once every shard's rows
  /// are set.
  const float* inputs();
  size_t input_size() const { return input_; }

  /// From the gradient of the inputs (samples() x input_size()), every
  /// row's gradient; then row_grads(s) holds shard s's, in ids(s) order.
  void backward(const float* input_grad);
  std::vector<float> row_grads(int32_t s) const;

private:
  int numeric_, fields_, dim_;
  size_t input_;
  int n_ = 0;
  const float* numeric_rows_ = nullptr;
  std::vector<uint32_t> samples_;
  id_index scratch_;
  bag_lookup lookup_;
  std::vector<std::vector<uint64_t>> ids_;
  /// Per shard, the batch's row (index into lookup_.unique) of each id.
  std::vector<std::vector<uint32_t>> members_;
  std::vector<float> rows_, pooled_, x_, pooled_grad_, row_grad_;
};

} // namespace troupe
