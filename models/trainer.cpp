#include "models/trainer.hpp"

#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/base/metrics_log.hpp"
#include "runtime/config/run_identity.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <dirent.h>
#include <ostream>
#include <sys/stat.h>

#include "runtime/base/errc.hpp"

namespace troupe {

// -- local_trainer ------------------------------------------------------------

local_trainer::local_trainer(model& m, const optimizer_config& cfg)
  : model_(m), opt_(cfg, m.layout().total()),
    fused_sgd_(cfg.type == optimizer_config::kind::sgd
               && cfg.weight_decay == 0) {
  if (!m.backend().host_accessible()) {
    host_params_.resize(m.layout().total());
    host_grads_.resize(m.layout().total());
    m.get_params(host_params_.data());
  }
}

batch_loss local_trainer::step(const float* x, batch_targets y, int batch) {
  if (fused_sgd_) {
    auto lr = static_cast<float>(learning_rate_at(opt_.config(), step_));
    auto result = model_.sgd_step(x, y, batch, lr);
    ++step_;
    return result;
  }
  auto result = model_.forward_backward(x, y, batch);
  if (model_.backend().host_accessible()) {
    // Host memory: update in place, no copies.
    opt_.apply(model_.params(), model_.grads(), step_);
  } else {
    model_.get_grads(host_grads_.data());
    opt_.apply(host_params_.data(), host_grads_.data(), step_);
    model_.set_params(host_params_.data());
  }
  ++step_;
  return result;
}

checkpoint local_trainer::snapshot() const {
  checkpoint ckpt;
  ckpt.step = step_;
  ckpt.layout = model_.layout();
  ckpt.params.resize(model_.layout().total());
  model_.get_params(ckpt.params.data());
  ckpt.slots = opt_.copy_slots();
  ckpt.metadata["optimizer"] = to_string(opt_.config().type);
  ckpt.metadata["model"] = model_.summary();
  return ckpt;
}

caf::error local_trainer::restore(const checkpoint& ckpt,
                                  const std::string& origin) {
  if (auto err = check_layout(ckpt, model_.layout(), origin))
    return err;
  auto slots = opt_.slots();
  bool same = slots.size() == ckpt.slots.size();
  for (size_t i = 0; same && i < slots.size(); ++i)
    same = slots[i].first == ckpt.slots[i].first;
  if (!same) {
    auto names = [](auto& list) {
      std::string out;
      for (auto& entry : list)
        out += (out.empty() ? "" : ",") + entry.first;
      return out.empty() ? std::string{"none"} : out;
    };
    return make_error(errc::bad_format,
                      origin + ": optimizer state (" + names(ckpt.slots)
                        + ") does not match the configured optimizer "
                        + to_string(opt_.config().type) + " (" + names(slots)
                        + ")");
  }
  model_.set_params(ckpt.params.data());
  if (!host_params_.empty())
    host_params_ = ckpt.params;
  for (size_t i = 0; i < slots.size(); ++i)
    *slots[i].second = ckpt.slots[i].second;
  step_ = ckpt.step;
  return caf::none;
}

// -- evaluation ---------------------------------------------------------------

namespace {

/// The squared deviation of `data`'s targets from their per-target means,
/// summed over all of them: R^2's denominator.
double target_deviation(const dataset& data) {
  const auto width = static_cast<size_t>(data.classes);
  std::vector<double> mean(width, 0.0);
  for (size_t i = 0; i < data.targets.size(); ++i)
    mean[i % width] += data.targets[i];
  for (auto& m : mean)
    m /= static_cast<double>(data.count);
  double sum = 0;
  for (size_t i = 0; i < data.targets.size(); ++i) {
    double d = data.targets[i] - mean[i % width];
    sum += d * d;
  }
  return sum;
}

} // namespace

eval_result evaluate(model& m, const dataset& data, int batch_size) {
  eval_result out;
  const size_t size = data.sample_size();
  const auto width = static_cast<size_t>(data.classes);
  batch_loss total;
  std::vector<float> batch(static_cast<size_t>(batch_size) * size);
  for (int64_t first = 0; first < data.count; first += batch_size) {
    int n = static_cast<int>(std::min<int64_t>(batch_size, data.count - first));
    data.features.read_range(first, n, batch.data());
    const float* x = batch.data();
    auto r = data.has_targets() ? m.forward(
               x, data.targets.data() + static_cast<size_t>(first) * width, n)
                                : m.forward(x, data.labels.data() + first, n);
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
    total.abs_err_sum += r.abs_err_sum;
  }
  out.count = data.count;
  out.regression = is_regression(m.loss());
  if (data.count > 0) {
    const auto n = static_cast<double>(data.count);
    out.loss = total.loss_sum / n;
    out.accuracy = out.regression ? 0 : static_cast<double>(total.correct) / n;
    if (out.regression) {
      out.mae = total.abs_err_sum / n;
      // loss_sum * width is the set's summed squared error.
      double deviation = target_deviation(data);
      out.r2 = deviation > 0
                 ? 1 - total.loss_sum * static_cast<double>(width) / deviation
                 : 0;
    }
  }
  return out;
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, x);
  return buf;
}

logit_row read_logits(const float* z, size_t classes) {
  logit_row r;
  for (size_t c = 1; c < classes; ++c)
    if (z[c] > z[r.best])
      r.best = c;
  double sum = 0;
  for (size_t c = 0; c < classes; ++c)
    sum += std::exp(static_cast<double>(z[c]) - z[r.best]);
  r.log_sum = std::log(sum);
  return r;
}

detailed_eval evaluate_per_class(model& m, const dataset& data,
                                 int batch_size) {
  detailed_eval out;
  if (data.has_targets()) {
    out.overall = evaluate(m, data, batch_size);
    return out;
  }
  const auto classes = static_cast<size_t>(m.classes());
  out.confusion.assign(classes, std::vector<int64_t>(classes, 0));
  const size_t size = data.sample_size();
  std::vector<float> logits(static_cast<size_t>(batch_size) * classes);
  std::vector<float> batch(static_cast<size_t>(batch_size) * size);
  double loss = 0;
  int64_t correct = 0;
  for (int64_t first = 0; first < data.count; first += batch_size) {
    int n = static_cast<int>(std::min<int64_t>(batch_size, data.count - first));
    data.features.read_range(first, n, batch.data());
    m.logits(batch.data(), n, logits.data());
    for (int i = 0; i < n; ++i) {
      const float* z = logits.data() + static_cast<size_t>(i) * classes;
      auto label = static_cast<size_t>(
        data.labels[static_cast<size_t>(first + i)]);
      auto row = read_logits(z, classes);
      loss += row.log_sum - (static_cast<double>(z[label]) - z[row.best]);
      correct += row.best == label ? 1 : 0;
      ++out.confusion[label][row.best];
    }
  }
  out.overall.count = data.count;
  if (data.count > 0) {
    out.overall.loss = loss / static_cast<double>(data.count);
    out.overall.accuracy = static_cast<double>(correct)
                           / static_cast<double>(data.count);
  }
  return out;
}

// -- the loop -----------------------------------------------------------------

int64_t steps_per_epoch(int64_t samples, int batch_size) {
  return (samples + batch_size - 1) / batch_size;
}

std::string newest_checkpoint(const std::string& dir) {
  auto files = list_checkpoints(dir);
  return files.empty() ? std::string{} : files.front().path;
}

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

caf::error save(const local_trainer& trainer, const checkpoint_config& cfg,
                const run_stamp& stamp, int64_t spe, std::ostream& log) {
  auto ckpt = trainer.snapshot();
  ckpt.metadata["epoch"] = std::to_string(ckpt.step / spe);
  ckpt.metadata["batch_in_epoch"] = std::to_string(ckpt.step % spe);
  stamp_checkpoint(ckpt, stamp);
  auto path = cfg.dir + "/ckpt-" + std::to_string(ckpt.step) + ".safetensors";
  if (auto err = write_checkpoint(path, ckpt))
    return err;
  log << "checkpoint: step " << ckpt.step << " -> " << path << std::endl;
  prune_checkpoints(cfg.dir, stamp, cfg.keep);
  return caf::none;
}

} // namespace

caf::expected<run_summary> run_local_training(const run_config& cfg,
                                              const train_test& data,
                                              compute_backend& be,
                                              std::ostream& log,
                                              local_status* status) {
  const auto& tc = cfg.training;
  if (cfg.model.type == model_config::kind::click)
    return make_error(errc::invalid_config,
                      "/model/type: a click model's embedding table lives on "
                      "parameter shards, which troupe-train does not run: "
                      "train it with troupe-node (troupe-node --config F "
                      "runs the whole cluster in one process)");
  auto made = make_model(cfg.model, data.train.height, data.train.width,
                         data.train.channels, data.train.classes, be);
  if (!made)
    return made.error();
  model& m = **made;
  local_trainer trainer{m, tc.optimizer};
  const int64_t spe = steps_per_epoch(data.train.count, tc.batch_size);
  int64_t last_step = spe * tc.epochs;
  if (tc.max_steps > 0)
    last_step = std::min(last_step, tc.max_steps);
  log << "model: " << m.summary() << " (" << m.layout().total()
      << " parameters)\n"
      << "data: " << data.train.count << " training, "
      << (data.validation.count > 0
            ? std::to_string(data.validation.count) + " validation, "
            : std::string{})
      << data.test.count << " test samples from " << data.train.source << "\n"
      << "training: batch " << tc.batch_size << ", " << spe
      << " steps per epoch, " << last_step << " steps, optimizer "
      << to_string(tc.optimizer.type) << " lr " << tc.optimizer.learning_rate
      << ", backend " << be.describe() << std::endl;

  run_stamp stamp{new_run_id(), training_identity(cfg)};
  if (!tc.checkpoint.dir.empty()) {
    if (mkdir(tc.checkpoint.dir.c_str(), 0755) != 0 && errno != EEXIST)
      return make_error(errc::io_error,
                        tc.checkpoint.dir + ": cannot create checkpoint dir");
    if (tc.checkpoint.resume) {
      auto found = load_newest(tc.checkpoint.dir, stamp,
                               checkpoint_pick::compatible, m.layout());
      if (!found)
        return found.error();
      if (!*found) {
        log << "resume: no checkpoint in " << tc.checkpoint.dir
            << ", starting at step 0" << std::endl;
      } else {
        auto& [path, ckpt] = **found;
        if (auto err = trainer.restore(ckpt, path))
          return err;
        // The run goes on under its own id.
        if (auto it = ckpt.metadata.find("run_id");
            it != ckpt.metadata.end() && !it->second.empty())
          stamp.run_id = it->second;
        log << "resume: step " << trainer.global_step() << " from " << path
            << " (run " << stamp.run_id << ")" << std::endl;
        if (trainer.global_step() >= last_step)
          log << "resume: the run had reached its last step (" << last_step
              << "): nothing is left to train; --epochs or --max-steps "
                 "train further, --fresh starts over"
              << std::endl;
      }
    } else {
      auto aside = set_aside_checkpoints(tc.checkpoint.dir, stamp);
      if (!aside)
        return aside.error();
      if (!aside->empty())
        log << "starting over: the checkpoints of earlier runs in "
            << tc.checkpoint.dir << " are set aside in " << *aside << std::endl;
    }
  }

  metrics_log metrics;
  if (!cfg.cluster.metrics_dir.empty()) {
    metrics_run mr{cfg.name, stamp.run_id,         "local", "shared",
                   1,        trainer.global_step()};
    mr.score = score_name(cfg.model.loss);
    if (auto err = metrics.open(cfg.cluster.metrics_dir, mr))
      return err;
    log << "metrics: " << metrics.base() << ".{jsonl,csv,progress.csv}"
        << std::endl;
  }
  if (status != nullptr) {
    std::lock_guard<std::mutex> guard{status->mutex};
    status->run_id = stamp.run_id;
    status->total_steps = last_step;
    status->steps = trainer.global_step();
    status->learning_rate = learning_rate_at(tc.optimizer, status->steps);
  }

  const size_t size = data.train.sample_size();
  // Batches are gathered into the backend's host memory (pinned on a GPU,
  // so the upload is one DMA).
  auto x_buf = be.allocate_host(static_cast<size_t>(tc.batch_size) * size
                                * sizeof(float));
  auto y_buf = be.allocate_host(static_cast<size_t>(tc.batch_size)
                                * sizeof(int32_t));
  // Float targets, when the data has them.
  std::vector<float> t(data.train.has_targets()
                         ? static_cast<size_t>(tc.batch_size)
                             * static_cast<size_t>(data.train.classes)
                         : 0);
  float* x = x_buf.floats();
  int32_t* y = y_buf.ints();
  std::vector<uint32_t> order;
  int64_t order_epoch = -1;
  run_summary summary;
  double train_seconds = 0, window_seconds = 0, window_loss = 0;
  int64_t window_examples = 0, window_steps = 0, trained_examples = 0;
  const std::string watched = data.watched_name();
  auto report_eval = [&](int64_t step) {
    summary.test = evaluate(m, data.watched(), std::max(tc.batch_size, 256));
    metrics.evaluation(train_seconds, step, double(step) / spe,
                       headline(summary.test), summary.test.loss);
    if (status != nullptr && !summary.test.regression) {
      std::lock_guard<std::mutex> guard{status->mutex};
      status->test_accuracy = summary.test.accuracy;
    }
    log << "step " << step << ", epoch " << fixed(double(step) / spe, 2) << ": "
        << describe_scores(summary.test, watched) << " (" << summary.test.count
        << " examples)" << std::endl;
  };
  while (trainer.global_step() < last_step) {
    const int64_t step = trainer.global_step();
    const int64_t epoch = step / spe;
    if (epoch != order_epoch) {
      order = epoch_order(static_cast<size_t>(data.train.count), tc.seed, epoch,
                          static_cast<size_t>(tc.shuffle_block));
      order_epoch = epoch;
    }
    const int64_t first = (step % spe) * tc.batch_size;
    const int n = static_cast<int>(
      std::min<int64_t>(tc.batch_size, data.train.count - first));
    auto t0 = clock_type::now();
    gather_batch(data.train, order.data() + first, n, x, y, t.data());
    auto r = t.empty() ? trainer.step(x, y, n) : trainer.step(x, t.data(), n);
    double step_seconds = seconds_since(t0);
    train_seconds += step_seconds;
    window_seconds += step_seconds;
    double mean_loss = r.loss_sum / n;
    if (!std::isfinite(mean_loss))
      return make_error(errc::non_finite,
                        "loss became " + fixed(mean_loss, 4) + " at step "
                          + std::to_string(step)
                          + "; lower the learning rate or check the data");
    window_loss += mean_loss;
    ++window_steps;
    window_examples += n;
    trained_examples += n;
    const int64_t done = trainer.global_step();
    if (status != nullptr) { // uncontended but for a scrape: ~20 ns a step
      std::lock_guard<std::mutex> guard{status->mutex};
      status->steps = done;
      status->samples = trained_examples;
      status->epoch = double(done) / spe;
      status->seconds = train_seconds;
      // A moving mean over about ten steps, as the chief's recent loss.
      status->loss = status->loss < 0 ? mean_loss
                                      : 0.9 * status->loss + 0.1 * mean_loss;
      status->learning_rate = learning_rate_at(tc.optimizer, done);
    }
    if (done % tc.log_every_steps == 0 || done == last_step) {
      // Training time only: evaluation and checkpoints are not steps.
      double elapsed = window_seconds;
      log << "step " << done << ", epoch " << (done - 1) / spe + 1
          << ", loss = " << fixed(window_loss / window_steps, 4) << " ("
          << fixed(window_examples / elapsed, 1) << " examples/sec; "
          << fixed(elapsed / window_steps, 4) << " sec/batch)" << std::endl;
      metrics.progress(train_seconds, done, double(done) / spe,
                       window_loss / window_steps, window_examples / elapsed);
      window_loss = 0;
      window_steps = window_examples = 0;
      window_seconds = 0;
    }
    bool epoch_end = done % spe == 0;
    if ((tc.eval_every_steps > 0 ? done % tc.eval_every_steps == 0 : epoch_end)
        && done != last_step) {
      report_eval(done);
    }
    if (!tc.checkpoint.dir.empty() && tc.checkpoint.every_steps > 0
        && done % tc.checkpoint.every_steps == 0 && done != last_step)
      if (auto err = save(trainer, tc.checkpoint, stamp, spe, log))
        return err;
  }
  report_eval(trainer.global_step());
  if (data.validation.count > 0) {
    // Scored once, at the end: the test set.
    summary.test = evaluate(m, data.test, std::max(tc.batch_size, 256));
    log << "final: " << describe_scores(summary.test, "test") << " ("
        << summary.test.count << " examples)" << std::endl;
  }
  if (!tc.checkpoint.dir.empty())
    if (auto err = save(trainer, tc.checkpoint, stamp, spe, log))
      return err;
  summary.steps = trainer.global_step();
  summary.epochs = summary.steps / spe;
  summary.seconds = train_seconds;
  summary.examples_per_sec = train_seconds > 0
                               ? trained_examples / train_seconds
                               : 0;
  log << "done: " << summary.steps << " steps (" << summary.epochs
      << " epochs) in " << fixed(summary.seconds, 1) << " s of training, "
      << fixed(summary.examples_per_sec, 1) << " examples/sec, test "
      << headline_name(summary.test) << " = "
      << fixed(headline(summary.test), 4) << std::endl;
  return summary;
}

} // namespace troupe
