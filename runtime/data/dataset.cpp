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

const char* describe(target_kind k) {
  switch (k) {
    case target_kind::classes: return "class labels";
    case target_kind::values: return "float targets";
    case target_kind::probabilities: return "targets in [0, 1]";
  }
  return "?";
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
    auto label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
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
