#include "actors/worker/batch_reader.hpp"

#include "actors/timing.hpp"

namespace troupe {

batch_reader::batch_reader(const dataset& train, compute_backend& backend,
                           size_t batch_size)
  : train_(train) {
  x_ = backend.allocate_host(batch_size * train.sample_size() * sizeof(float));
  y_ = backend.allocate_host(batch_size * sizeof(int32_t));
  if (train.has_targets())
    targets_.resize(batch_size * static_cast<size_t>(train.classes));
}

caf::error batch_reader::read(const std::vector<uint32_t>& samples,
                              read_cost& cost) {
  auto n = static_cast<int>(samples.size());
  auto t0 = now_seconds();
  if (auto err = check_files(train_, samples.data(), n))
    return err;
  gather_batch(train_, samples.data(), n, x_.floats(), y_.ints(),
               targets_.data());
  cost.seconds += now_seconds() - t0;
  if (!train_.mapped.empty()) // read from the files' pages
    cost.bytes += static_cast<int64_t>(
                    train_.features.stored_bytes()
                    / static_cast<uint64_t>(train_.features.rows()))
                  * n;
  return {};
}

} // namespace troupe
