#include "models/click_model.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/base/errc.hpp"

namespace troupe {

caf::expected<std::unique_ptr<click_model>>
click_model::make(const click_schema& schema, const click_model_config& cfg,
                  compute_backend& be) {
  if (!be.host_accessible())
    return make_error(errc::invalid_config,
                      "the click model runs on a host backend (cpu)");
  if (cfg.dim < 1 || cfg.batch_size < 1 || schema.categorical < 0
      || schema.numeric < 0 || schema.categorical + schema.numeric < 1)
    return make_error(errc::invalid_config,
                      "the click model needs fields, dim >= 1 and a batch");
  model_config mc;
  mc.type = model_config::kind::mlp;
  mc.hidden = cfg.hidden;
  mc.act = activation::relu;
  mc.init = model_config::init_kind::he;
  mc.seed = cfg.seed;
  auto width = schema.numeric + schema.categorical * cfg.dim;
  auto mlp = make_model(mc, 1, width, 1, 2, be);
  if (!mlp)
    return mlp.error();
  auto m = std::unique_ptr<click_model>(
    new click_model(schema, cfg, std::move(*mlp)));
  return m;
}

click_model::click_model(const click_schema& schema,
                         const click_model_config& cfg,
                         std::unique_ptr<model> mlp)
  : schema_(schema), cfg_(cfg), mlp_(std::move(mlp)),
    dense_opt_(cfg.dense, mlp_->layout().total()),
    batch_(schema.numeric, schema.categorical, cfg.dim, 1) {
  embedding_table_config t;
  t.name = "categorical";
  t.vocabulary = schema.vocabulary;
  t.dim = cfg.dim;
  t.seed = cfg.seed;
  table_ = std::make_unique<sparse_table>(t, cfg.sparse);
  auto host = mlp_->initial_params();
  mlp_->set_params(host.data());
}

void click_model::pull_rows(const click_data& d, const uint32_t* idx, int n) {
  batch_.plan(d, d.numeric.data(), idx, n);
  auto& ids = batch_.ids(0);
  std::vector<float> rows(ids.size() * static_cast<size_t>(cfg_.dim));
  // Ids come from the reader, which hashed them below the vocabulary.
  (void)table_->pull(ids.data(), ids.size(), rows.data());
  batch_.set_rows(0, rows.data());
}

double click_model::train_step(const click_data& d, const uint32_t* idx,
                               int n) {
  pull_rows(d, idx, n);
  const float* x = batch_.inputs();
  labels_.resize(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s)
    labels_[static_cast<size_t>(s)] = d.labels[idx[s]] > 0.5f ? 1 : 0;
  input_grad_.resize(static_cast<size_t>(n) * batch_.input_size());
  auto loss = mlp_->forward_backward(x, labels_.data(), n, input_grad_.data());
  dense_opt_.apply(mlp_->params(), mlp_->grads(), steps_);
  // The pooled part of the input's gradient goes back to the rows.
  batch_.backward(input_grad_.data());
  auto grads = batch_.row_grads(0);
  (void)table_->push(batch_.ids(0).data(), batch_.ids(0).size(), grads.data());
  ++steps_;
  return loss.loss_sum / n;
}

click_scores click_model::evaluate(const click_data& d,
                                   std::vector<double>* probabilities) {
  std::vector<double> p(static_cast<size_t>(d.count));
  std::vector<uint32_t> idx;
  std::vector<float> logits;
  // Evaluation pulls rows too: an unseen value gets its initial row, as
  // it would on the shards.
  for (int64_t first = 0; first < d.count; first += cfg_.batch_size) {
    int n = static_cast<int>(
      std::min<int64_t>(cfg_.batch_size, d.count - first));
    idx.resize(static_cast<size_t>(n));
    for (int s = 0; s < n; ++s)
      idx[static_cast<size_t>(s)] = static_cast<uint32_t>(first + s);
    pull_rows(d, idx.data(), n);
    logits.resize(static_cast<size_t>(n) * 2);
    mlp_->logits(batch_.inputs(), n, logits.data());
    for (int s = 0; s < n; ++s)
      p[static_cast<size_t>(first + s)] = click_probability(
        logits.data() + 2 * static_cast<size_t>(s));
  }
  click_scores out;
  out.count = d.count;
  out.log_loss = log_loss(p, d.labels);
  out.auc = roc_auc(p, d.labels);
  if (probabilities)
    *probabilities = std::move(p);
  return out;
}

} // namespace troupe
