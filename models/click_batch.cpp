#include "models/click_batch.hpp"

#include <algorithm>

#include "runtime/sparse/sparse_table.hpp"

namespace troupe {

click_batch::click_batch(int numeric, int fields, int dim, int32_t shards)
  : numeric_(numeric), fields_(fields), dim_(dim),
    input_(static_cast<size_t>(numeric)
           + static_cast<size_t>(fields) * static_cast<size_t>(dim)),
    ids_(static_cast<size_t>(std::max(shards, 1))), members_(ids_.size()) {}

void click_batch::plan(const click_data& logs, const float* numeric,
                       const uint32_t* idx, int n) {
  n_ = n;
  numeric_rows_ = numeric;
  samples_.assign(idx, idx + n);
  plan_lookup(logs, idx, n, scratch_, lookup_);
  for (auto& v : ids_)
    v.clear();
  for (auto& v : members_)
    v.clear();
  auto shards = static_cast<int32_t>(ids_.size());
  for (uint32_t u = 0; u < lookup_.unique.size(); ++u) {
    auto id = lookup_.unique[u];
    auto s = static_cast<size_t>(shards == 1 ? 0 : shard_of_row(id, shards));
    ids_[s].push_back(id);
    members_[s].push_back(u);
  }
  rows_.resize(lookup_.unique.size() * static_cast<size_t>(dim_));
}

std::vector<int32_t> click_batch::holding() const {
  std::vector<int32_t> out;
  for (int32_t s = 0; s < shards(); ++s)
    if (!ids(s).empty())
      out.push_back(s);
  return out;
}

void click_batch::set_rows(int32_t s, const float* rows) {
  const auto dim = static_cast<size_t>(dim_);
  auto& members = members_[static_cast<size_t>(s)];
  for (size_t k = 0; k < members.size(); ++k)
    std::copy_n(rows + k * dim, dim, rows_.data() + members[k] * dim);
}

const float* click_batch::inputs() {
  const auto dim = static_cast<size_t>(dim_);
  const auto K = static_cast<size_t>(numeric_);
  const auto F = static_cast<size_t>(fields_);
  pooled_.resize(static_cast<size_t>(n_) * F * dim);
  pool_forward(lookup_, rows_.data(), dim_, pooled_.data());
  x_.resize(static_cast<size_t>(n_) * input_);
  for (int s = 0; s < n_; ++s) {
    float* x = x_.data() + static_cast<size_t>(s) * input_;
    if (K > 0)
      std::copy_n(numeric_rows_ + static_cast<size_t>(samples_[s]) * K, K, x);
    std::copy_n(pooled_.data() + static_cast<size_t>(s) * F * dim, F * dim,
                x + K);
  }
  return x_.data();
}

void click_batch::backward(const float* input_grad) {
  const auto dim = static_cast<size_t>(dim_);
  const auto K = static_cast<size_t>(numeric_);
  const auto F = static_cast<size_t>(fields_);
  pooled_grad_.resize(static_cast<size_t>(n_) * F * dim);
  for (int s = 0; s < n_; ++s)
    std::copy_n(input_grad + static_cast<size_t>(s) * input_ + K, F * dim,
                pooled_grad_.data() + static_cast<size_t>(s) * F * dim);
  row_grad_.resize(lookup_.unique.size() * dim);
  pool_backward(lookup_, pooled_grad_.data(), dim_, row_grad_.data());
}

std::vector<float> click_batch::row_grads(int32_t s) const {
  const auto dim = static_cast<size_t>(dim_);
  auto& members = members_[static_cast<size_t>(s)];
  std::vector<float> out(members.size() * dim);
  for (size_t k = 0; k < members.size(); ++k)
    std::copy_n(row_grad_.data() + members[k] * dim, dim, out.data() + k * dim);
  return out;
}

} // namespace troupe
