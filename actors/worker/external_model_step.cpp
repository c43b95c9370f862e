// The step of a model troupe does not compute (model.type "external"):
// the pulled blocks go as they are to the user's step function (the
// Python module's), and the gradient it writes is pushed like any other.
// A model with embedding tables has its step name each sample's keys; the
// rows of the batch's distinct keys are pulled before it computes, and the
// gradients it gives them are pushed beside the dense one.
//
// In async mode with cluster.prefetch the step computes on a thread of its
// own (computes_apart): the worker meanwhile leases the next batch and
// pulls its values and rows, so the user's function finds them there when
// it returns. Each step's rows are then a step_tables of their own: the
// next step's are planned and filled while this one's are computed on and
// pushed.
#include "actors/worker/step_kind.hpp"

#include "actors/worker/table_batch.hpp"
#include "actors/worker/worker.hpp"
#include "models/external_step.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

class external_model_step : public step_kind {
public:
  external_model_step(const worker_options& opts)
    : worker_(opts.id), step_(opts.external),
      tables_(embedding_tables(opts.cfg),
              static_cast<int32_t>(opts.shards.size())),
      has_tables_(!opts.cfg.model.tables.empty()),
      apart_(opts.cfg.cluster.consistency == cluster_config::mode::async
             && opts.cfg.cluster.prefetch) {
    pulled_.layout = opts.layout.get();
    take_ranges(opts.ranges);
  }

  size_t flat_size() const override { return pulled_.layout->total(); }

  void take_values(
    size_t i, const flat_range&,
    const std::shared_ptr<const std::vector<float>>& values) override {
    pulled_.blocks[i] = values;
  }

  void take_ranges(const std::vector<flat_range>& ranges) override {
    pulled_.ranges = ranges;
    pulled_.blocks.assign(ranges.size(), nullptr);
    tables_.set_shards(static_cast<int32_t>(ranges.size()));
  }

  caf::expected<std::vector<row_request>> rows_needed(const lease_grant& lease,
                                                      int32_t worker) override {
    next_ = std::make_shared<step_tables>();
    if (!has_tables_)
      return std::vector<row_request>{};
    next_->rows = tables_.start();
    if (auto err = step_->batch_keys(lease.samples, next_->rows))
      return failed(err);
    auto planned = tables_.plan(*next_, lease.samples, worker);
    if (!planned)
      return failed(planned.error());
    return planned;
  }

  caf::error take_rows(const std::vector<row_block>& blocks) override {
    return table_batch::take(blocks, *next_);
  }

  std::vector<row_push>
  rows_to_push(int32_t worker, int64_t batch,
               const std::vector<int64_t>& versions) override {
    if (!has_tables_ || !current_)
      return {};
    return table_batch::pushes(*current_, worker, batch, versions);
  }

  bool computes_apart() const override { return apart_; }

  compute_job compute_apart(const lease_grant& lease, int64_t clock,
                            float* grads,
                            std::shared_ptr<const void> keep) override {
    // What the step reads is taken now, on the worker's thread: the next
    // step's values and rows may come while this one computes.
    current_ = next_ ? std::move(next_) : std::make_shared<step_tables>();
    for (auto& r : current_->rows)
      r.grads.assign(r.unique.size() * static_cast<size_t>(r.dim), 0.f);
    return [worker = worker_, step = step_, pulled = pulled_,
            samples = lease.samples, tables = current_, clock, grads,
            keep = std::move(keep)]() -> caf::expected<batch_loss> {
      auto loss = step->step(pulled, samples, grads, tables->rows);
      if (loss)
        return loss;
      // A result the step's contract refuses is kept as such: the chief
      // ends the run instead of restarting the worker.
      return make_error(
        loss.error() == errc::bad_step ? errc::bad_step : errc::worker_failed,
        "worker " + std::to_string(worker) + ": step " + std::to_string(clock)
          + ": " + describe(loss.error()));
    };
  }

  caf::expected<batch_loss> compute(const lease_grant& lease, int64_t clock,
                                    const gradient_buffer& grads) override {
    // The computation apart, run here on the worker's thread, into the
    // worker's buffer.
    return compute_apart(lease, clock, grads(), nullptr)();
  }

private:
  /// A failure of the keys, as compute's: a key the contract refuses ends
  /// the run (errc::bad_step), others restart the worker.
  caf::error failed(const caf::error& err) const {
    return make_error(
      err == errc::bad_step ? errc::bad_step : errc::worker_failed,
      "worker " + std::to_string(worker_) + ": " + describe(err));
  }

  int32_t worker_;
  std::shared_ptr<external_step> step_;
  pulled_params pulled_; ///< the values of the next step to compute
  table_batch tables_;
  bool has_tables_;
  bool apart_;
  /// The rows of the step being pulled, and of the step computed last
  /// (whose gradients are pushed).
  std::shared_ptr<step_tables> next_, current_;
};

} // namespace

std::unique_ptr<step_kind>
make_external_model_step(const worker_options& opts) {
  return std::make_unique<external_model_step>(opts);
}

} // namespace troupe
