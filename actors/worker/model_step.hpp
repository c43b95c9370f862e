// What the kinds of step of troupe's own models share (dense, click,
// elastic): the replica on its backend, and the leased batch read into
// the backend's host memory. Each kind's file makes its own from these
// parts (make_dense_step, make_click_step, make_elastic_step). Private to
// actors/worker/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/worker/batch_reader.hpp"
#include "actors/worker/step_kind.hpp"
#include "models/model.hpp"
#include "runtime/config/config.hpp"

namespace troupe {

/// A worker's model, set up on its backend (step_kind.cpp makes it).
struct model_parts {
  int32_t worker = 0;
  const run_config* cfg = nullptr;
  const dataset* train = nullptr;
  std::unique_ptr<compute_backend> backend;
  std::unique_ptr<model> replica;
};

class model_step : public step_kind {
public:
  size_t flat_size() const override { return replica_->layout().total(); }

  /// The pulled values go into the replica's parameters on its backend.
  void take_values(
    size_t, const flat_range& r,
    const std::shared_ptr<const std::vector<float>>& values) override {
    backend_->upload(replica_->params() + r.begin, values->data(),
                     r.size() * sizeof(float));
  }

protected:
  explicit model_step(model_parts parts);

  /// Reads the leased samples; an error names this worker and the file
  /// that changed (errc::data_changed).
  caf::error read(const lease_grant& lease);

  /// "worker N: " for errors.
  std::string who() const { return "worker " + std::to_string(worker_); }

  int32_t worker_;
  const run_config& cfg_;
  const dataset& train_;
  std::unique_ptr<compute_backend> backend_;
  std::unique_ptr<model> replica_;
  batch_reader batch_;
};

std::unique_ptr<step_kind> make_dense_step(model_parts parts);
std::unique_ptr<step_kind> make_click_step(model_parts parts, int32_t shards);
std::unique_ptr<step_kind> make_elastic_step(model_parts parts);

} // namespace troupe
