#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/base/random.hpp"

namespace troupe {

std::vector<uint32_t> epoch_order(size_t n, uint64_t seed, int64_t epoch,
                                  size_t block) {
  std::vector<uint32_t> order(n);
  splitmix64 rng{seed * 0x2545f4914f6cdd1dull
                 ^ static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ull};
  auto shuffle = [&](uint32_t* first, size_t count) {
    for (size_t i = count; i > 1; --i)
      std::swap(first[i - 1], first[rng.below(i)]);
  };
  if (block <= 1) {
    for (size_t i = 0; i < n; ++i)
      order[i] = static_cast<uint32_t>(i);
    shuffle(order.data(), n);
    return order;
  }
  const size_t blocks = (n + block - 1) / block;
  std::vector<uint32_t> which(blocks);
  for (size_t b = 0; b < blocks; ++b)
    which[b] = static_cast<uint32_t>(b);
  shuffle(which.data(), blocks);
  size_t at = 0;
  for (auto b : which) {
    size_t first = static_cast<size_t>(b) * block;
    size_t count = std::min(block, n - first);
    for (size_t i = 0; i < count; ++i)
      order[at + i] = static_cast<uint32_t>(first + i);
    shuffle(order.data() + at, count);
    at += count;
  }
  return order;
}

std::vector<uint32_t> interleaved_order(const std::vector<size_t>& parts,
                                        uint64_t seed, int64_t epoch,
                                        size_t block, size_t open_parts) {
  block = std::max<size_t>(block, 1);
  open_parts = std::max<size_t>(open_parts, 1);
  // Part p holds samples [first[p], first[p + 1]).
  std::vector<size_t> first(parts.size() + 1, 0);
  for (size_t p = 0; p < parts.size(); ++p)
    first[p + 1] = first[p] + parts[p];
  std::vector<uint32_t> order(first.back());
  splitmix64 rng{seed * 0x2545f4914f6cdd1dull
                 ^ static_cast<uint64_t>(epoch) * 0x9e3779b97f4a7c15ull
                 ^ 0x696e7465726c6561ull}; // "interlea"
  auto shuffle = [&](uint32_t* at, size_t count) {
    for (size_t i = count; i > 1; --i)
      std::swap(at[i - 1], at[rng.below(i)]);
  };
  std::vector<uint32_t> queue(parts.size()); // parts not yet open
  for (size_t p = 0; p < parts.size(); ++p)
    queue[p] = static_cast<uint32_t>(p);
  shuffle(queue.data(), queue.size());
  std::reverse(queue.begin(), queue.end()); // taken from the back
  struct open_part {
    size_t next, end;
  };
  std::vector<open_part> open;
  auto open_next = [&] {
    while (!queue.empty() && open.size() < open_parts) {
      auto p = queue.back();
      queue.pop_back();
      if (parts[p] > 0)
        open.push_back({first[p], first[p + 1]});
    }
  };
  open_next();
  size_t at = 0;
  while (!open.empty()) {
    auto slot = static_cast<size_t>(rng.below(open.size()));
    auto& o = open[slot];
    size_t count = std::min(block, o.end - o.next);
    for (size_t i = 0; i < count; ++i)
      order[at + i] = static_cast<uint32_t>(o.next + i);
    shuffle(order.data() + at, count);
    o.next += count;
    at += count;
    if (o.next == o.end) {
      open.erase(open.begin() + static_cast<ptrdiff_t>(slot));
      open_next();
    }
  }
  return order;
}

const char* describe(target_kind k) {
  switch (k) {
    case target_kind::classes: return "class labels";
    case target_kind::values: return "float targets";
    case target_kind::probabilities: return "targets in [0, 1]";
  }
  return "?";
}

caf::error check_files(const dataset& data, const uint32_t* idx, int n) {
  const auto& parts = data.mapped;
  if (parts.empty())
    return caf::none;
  std::vector<char> seen(parts.size(), 0);
  for (int k = 0; k < n; ++k) {
    auto i = static_cast<int64_t>(idx[k]);
    auto p = static_cast<size_t>(
      std::upper_bound(parts.begin(), parts.end(), i,
                       [](int64_t x, const dataset::mapped_part& m) {
                         return x < m.first;
                       })
      - parts.begin());
    if (p == 0 || seen[p - 1] != 0)
      continue;
    seen[p - 1] = 1;
    if (auto err = parts[p - 1].file->stamp().check())
      return err;
  }
  return caf::none;
}

void gather_batch(const dataset& data, const uint32_t* idx, int n, float* x,
                  int32_t* y, float* t) {
  const size_t size = data.sample_size();
  const auto width = static_cast<size_t>(data.classes);
  for (int i = 0; i < n; ++i) {
    data.features.read(idx[i], x + static_cast<size_t>(i) * size);
    if (data.has_targets())
      std::memcpy(t + static_cast<size_t>(i) * width,
                  data.targets.data() + static_cast<size_t>(idx[i]) * width,
                  width * sizeof(float));
    else
      y[i] = data.labels[idx[i]];
  }
}

dataset make_synthetic(int64_t count, int height, int width, int channels,
                       int classes, double noise, uint64_t centre_seed,
                       uint64_t sample_seed) {
  dataset out;
  out.source = "synthetic";
  out.count = count;
  out.height = height;
  out.width = width;
  out.channels = channels;
  out.classes = classes;
  const size_t size = out.sample_size();
  std::vector<float> centres(static_cast<size_t>(classes) * size);
  splitmix64 crng{centre_seed};
  for (auto& c : centres)
    c = static_cast<float>(crng.uniform01());
  splitmix64 rng{sample_seed ^ 0x5bd1e995ull};
  std::vector<float> values(static_cast<size_t>(count) * size);
  out.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    auto label = static_cast<int32_t>(
      rng.below(static_cast<uint64_t>(classes)));
    out.labels[static_cast<size_t>(i)] = label;
    const float* c = centres.data() + static_cast<size_t>(label) * size;
    float* x = values.data() + static_cast<size_t>(i) * size;
    for (size_t j = 0; j < size; ++j)
      x[j] = std::clamp(static_cast<float>(c[j] + noise * rng.normal()), 0.f,
                        1.f);
  }
  out.features = feature_store::of_floats(std::move(values), size);
  return out;
}

} // namespace troupe
