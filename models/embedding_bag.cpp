#include "models/embedding_bag.hpp"

#include <algorithm>

namespace troupe {

void plan_lookup(const click_data& d, const uint32_t* samples, int n,
                 id_index& scratch, bag_lookup& out) {
  const int fields = d.schema.categorical;
  out.samples = n;
  out.fields = fields;
  out.ids.clear();
  out.bags.assign(1, 0);
  for (int s = 0; s < n; ++s)
    for (int f = 0; f < fields; ++f) {
      auto [begin, end] = d.field(samples[s], f);
      out.ids.insert(out.ids.end(), begin, end);
      out.bags.push_back(static_cast<uint32_t>(out.ids.size()));
    }
  dedup_ids(out.ids.data(), out.ids.size(), scratch, out.unique, out.position);
}

void pool_forward(const bag_lookup& lookup, const float* rows, int dim,
                  float* out) {
  const auto d = static_cast<size_t>(dim);
  const size_t bags = lookup.bags.size() - 1;
  for (size_t b = 0; b < bags; ++b) {
    float* o = out + b * d;
    std::fill(o, o + d, 0.f);
    auto first = lookup.bags[b], last = lookup.bags[b + 1];
    if (first == last)
      continue;
    for (auto v = first; v < last; ++v) {
      const float* r = rows + lookup.position[v] * d;
      for (size_t j = 0; j < d; ++j)
        o[j] += r[j];
    }
    const float scale = 1.f / static_cast<float>(last - first);
    for (size_t j = 0; j < d; ++j)
      o[j] *= scale;
  }
}

void pool_backward(const bag_lookup& lookup, const float* grad_out, int dim,
                   float* grad_rows) {
  const auto d = static_cast<size_t>(dim);
  std::fill(grad_rows, grad_rows + lookup.unique.size() * d, 0.f);
  const size_t bags = lookup.bags.size() - 1;
  for (size_t b = 0; b < bags; ++b) {
    auto first = lookup.bags[b], last = lookup.bags[b + 1];
    if (first == last)
      continue;
    const float scale = 1.f / static_cast<float>(last - first);
    const float* g = grad_out + b * d;
    for (auto v = first; v < last; ++v) {
      float* r = grad_rows + lookup.position[v] * d;
      for (size_t j = 0; j < d; ++j)
        r[j] += scale * g[j];
    }
  }
}

} // namespace troupe
