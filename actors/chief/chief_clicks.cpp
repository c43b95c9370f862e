// The chief's side of a click model: scoring it needs the rows of the
// scored samples, which live on the shards, so an evaluation pulls them
// batch by batch (as a worker pulls its batch's rows) instead of reading
// one flat parameter vector. Its table in checkpoints is chief_tables'.
#include <cmath>
#include <numeric>

#include "actors/chief/chief_ops.hpp"
#include "actors/timing.hpp"
#include "models/click_batch.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::chief_ops {

namespace {

/// Samples scored per round of row pulls: a few tens of thousands of rows
/// per shard at most.
constexpr int64_t eval_batch = 8192;

/// One evaluation in flight.
struct click_eval {
  std::shared_ptr<const train_test> keep; ///< holds `data` alive
  const dataset* data = nullptr;
  std::unique_ptr<click_batch> batch;
  std::vector<double> p; ///< click probability per sample
  std::vector<uint32_t> idx;
  std::vector<float> logits;
  std::function<void(eval_result, double)> done;
  std::function<void()> lost;
};

void finish(const std::shared_ptr<click_eval>& e) {
  auto& labels = e->data->clicks->labels;
  eval_result r;
  r.count = e->data->count;
  r.loss = log_loss(e->p, labels);
  int64_t hits = 0;
  for (size_t i = 0; i < e->p.size(); ++i)
    hits += (e->p[i] > 0.5) == (labels[i] > 0.5f);
  r.accuracy = r.count > 0
                 ? static_cast<double>(hits) / static_cast<double>(r.count)
                 : 0;
  e->done(r, roc_auc(e->p, labels));
}

/// Scores samples [first, first + eval_batch), then goes on.
void score_from(chief_self self, std::shared_ptr<click_eval> e, int64_t first) {
  auto count = e->data->count;
  if (first >= count)
    return finish(e);
  auto n = static_cast<int>(std::min(eval_batch, count - first));
  e->idx.resize(static_cast<size_t>(n));
  std::iota(e->idx.begin(), e->idx.end(), static_cast<uint32_t>(first));
  e->batch->plan(*e->data->clicks, e->data->features.contiguous_floats(),
                 e->idx.data(), n);
  const auto dim = static_cast<size_t>(self->state.opts.cfg.model.table.dim);
  ask_all_shards<row_block>(
    self,
    [=](size_t i) {
      auto shard = static_cast<int32_t>(i);
      return ask_shard(self, i, pull_atom_v,
                       row_request{shard, 0, -1, e->batch->ids(shard), true});
    },
    [=](std::vector<row_block>& blocks) {
      for (size_t i = 0; i < blocks.size(); ++i) {
        auto shard = static_cast<int32_t>(i);
        auto want = e->batch->ids(shard).size() * dim;
        auto got = blocks[i].values ? blocks[i].values->size() : 0;
        if (got != want)
          return fail_run(
            self, make_error(errc::wrong_size,
                             "shard " + std::to_string(i) + " answered "
                               + std::to_string(got) + " floats of rows for "
                               + std::to_string(want)));
        if (want > 0)
          e->batch->set_rows(shard, blocks[i].values->data());
      }
      e->logits.resize(static_cast<size_t>(n) * 2);
      self->state.eval.evaluator->logits(e->batch->inputs(), n,
                                         e->logits.data());
      for (int s = 0; s < n; ++s)
        e->p[static_cast<size_t>(first + s)] = click_probability(
          e->logits.data() + 2 * static_cast<size_t>(s));
      score_from(self, e, first + n);
    },
    e->lost);
}

} // namespace

void evaluate_clicks(chief_self self, const dataset& data,
                     std::function<void(eval_result, double auc)> done,
                     std::function<void()> lost) {
  auto& st = self->state;
  auto& cfg = st.opts.cfg;
  auto e = std::make_shared<click_eval>();
  e->keep = st.opts.data;
  e->data = &data;
  e->batch = std::make_unique<click_batch>(
    cfg.data.click_numeric, cfg.model.table_fields, cfg.model.table.dim,
    static_cast<int32_t>(st.shards.count()));
  e->p.assign(static_cast<size_t>(data.count), 0.5);
  e->done = std::move(done);
  e->lost = std::move(lost);
  score_from(self, std::move(e), 0);
}

} // namespace troupe::chief_ops
