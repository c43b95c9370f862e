// A worker's leased batch read from the training set: the samples'
// inputs and labels (or float targets) gathered into the backend's host
// memory (pinned on a GPU: one DMA to the device), and what reading them
// cost. Private to actors/worker/.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/worker/step_kind.hpp"
#include "models/model.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/data/dataset.hpp"

namespace troupe {

class batch_reader {
public:
  /// For batches of up to `batch_size` samples of `train`.
  batch_reader(const dataset& train, compute_backend& backend,
               size_t batch_size);

  /// Reads `samples` (adding the time and bytes to `cost`); an error
  /// (errc::data_changed) names a dataset file replaced under the run,
  /// which is not read: a mapped file cut short would end the process
  /// with SIGBUS.
  caf::error read(const std::vector<uint32_t>& samples, read_cost& cost);

  const float* inputs() { return x_.floats(); }

  /// The labels, written by a caller that reads them elsewhere (a click
  /// log streamed with its rows).
  int32_t* labels() { return y_.ints(); }

  /// The labels or float targets, as the model's loss reads them.
  batch_targets targets() {
    return targets_.empty() ? batch_targets{y_.ints()}
                            : batch_targets{targets_.data()};
  }

private:
  const dataset& train_;
  backend_buffer x_;
  backend_buffer y_;
  std::vector<float> targets_;
};

} // namespace troupe
