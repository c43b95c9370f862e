// What differs between the kinds of worker, behind one interface: where a
// pulled shard's values go, what a step computes, and what besides its
// gradient it asks and sends. The loop (worker.cpp) leases, pulls,
// pushes, settles and reports the same way for every kind, and asks its
// step_kind at those points; make_step_kind picks the kind, the one place
// that looks at the model's type and the elastic mode:
//
//   dense     troupe's own models (dense_step.cpp): the replica on a
//             backend, forward/backward on the leased batch
//   click     a click model (click_step.cpp): the batch's embedding rows
//             pulled from the shards that hold them, their gradients pushed
//   elastic   EASGD (elastic_step.cpp): local steps with its own
//             optimizer, every tau steps the elastic exchange with the
//             center the shards hold
//   external  the user's step function (external_model_step.cpp): the
//             pulled blocks go to it as they are
//
// Private to actors/worker/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "actors/protocol/shard_data_messages.hpp"
#include "caf/expected.hpp"
#include "runtime/compute/backend.hpp"
#include "runtime/params/param_layout.hpp"
#include "runtime/rules/batch_plan.hpp"

namespace troupe {

struct worker_options;

/// What reading a step's samples cost (worker_report's read_seconds and
/// read_bytes).
struct read_cost {
  double seconds = 0;
  int64_t bytes = 0;
};

/// Hands the step a flat gradient buffer that no shard reads any more, of
/// the kind's flat_size() floats (the loop keeps a pool of them).
using gradient_buffer = std::function<float*()>;

/// What a step sends the shards once it computed.
enum class step_push : uint8_t {
  gradient, ///< its gradient (and rows_to_push(), if any)
  none,     ///< nothing: an elastic worker's local step
  elastic,  ///< the elastic exchange: pull the center, push the difference
};

class step_kind {
public:
  virtual ~step_kind() = default;

  /// Floats of the flat vector, the size of the gradients pushed.
  virtual size_t flat_size() const = 0;

  /// Shard i's values, pulled: [r.begin, r.end) of the flat vector.
  virtual void
  take_values(size_t i, const flat_range& r,
              const std::shared_ptr<const std::vector<float>>& values) = 0;

  /// The shards moved and now own `ranges`.
  virtual void take_ranges(const std::vector<flat_range>&) {}

  /// Whether the first step waits for the shards' values (then
  /// start_from_values()): an elastic worker starts from the center.
  virtual bool starts_from_values() const { return false; }
  virtual void start_from_values() {}

  /// Whether each step pulls the values it computes on (not an elastic
  /// worker, which pulls every tau steps only).
  virtual bool pulls_each_step() const { return true; }

  /// The rows of embedding tables the leased batch needs before it
  /// computes, one request per shard that holds some (a click model's;
  /// none for the others). Reading the batch may fail.
  virtual caf::expected<std::vector<row_request>>
  rows_needed(const lease_grant&, int32_t /*worker*/) {
    return std::vector<row_request>{};
  }

  /// The rows asked for, in the order of rows_needed's requests.
  virtual caf::error take_rows(const std::vector<row_block>&) { return {}; }

  /// The step on the leased batch, the worker's `clock`th: forward/
  /// backward, its gradient into `grads()` (asked for only by a kind that
  /// pushes one). Returns the batch's loss, or why the step failed (the
  /// error names the worker).
  virtual caf::expected<batch_loss> compute(const lease_grant& lease,
                                            int64_t clock,
                                            const gradient_buffer& grads) = 0;

  /// Whether the step computes on a thread of its own (computes_apart),
  /// while the worker goes on leasing and pulling the next step.
  virtual bool computes_apart() const { return false; }

  /// For a kind that computes apart: takes what the step on `lease` reads
  /// (its values and rows as pulled) now, on the worker's thread, and
  /// returns the computation to run on another one, writing its gradient
  /// to `grads` (kept alive by `keep`). rows_needed, take_rows and
  /// take_values serve the next step meanwhile; rows_to_push still gives
  /// this step's rows.
  using compute_job = std::function<caf::expected<batch_loss>()>;
  virtual compute_job compute_apart(const lease_grant&, int64_t /*clock*/,
                                    float* /*grads*/,
                                    std::shared_ptr<const void> /*keep*/) {
    return nullptr;
  }

  /// What the step just computed sends the shards; `clock`: the worker's
  /// steps before it.
  virtual step_push push_after(int64_t /*clock*/) const {
    return step_push::gradient;
  }

  /// The row gradients of the step, each to the shard that sent the rows,
  /// tagged with `versions` (a click model's; none for the others).
  virtual std::vector<row_push> rows_to_push(int32_t /*worker*/,
                                             int64_t /*batch*/,
                                             const std::vector<int64_t>&
                                             /*versions*/) {
    return {};
  }

  /// step_push::elastic: the center is pulled (take_values); moves the
  /// local replica toward it and returns the elastic difference to push.
  virtual std::shared_ptr<const std::vector<float>> elastic_difference() {
    return nullptr;
  }

  /// What reading samples cost since the last call.
  read_cost take_read_cost() { return std::exchange(cost_, read_cost{}); }

protected:
  read_cost cost_;
};

/// The kind of step `opts` asks for (its model's type, its consistency
/// mode), set up on its backend; an error when it cannot be (no step
/// function for an external model, a device that fails, a click model off
/// the CPU).
caf::expected<std::unique_ptr<step_kind>>
make_step_kind(const worker_options& opts);

} // namespace troupe
