// The "training" section of a run config: batches, epochs and steps, the
// optimizers of the dense parameters and of the embedding tables, the
// schedule of evaluations, checkpoints and logs.
#include <string>
#include <thread>

#include "runtime/base/errc.hpp"
#include "runtime/config/config_reader.hpp"

namespace troupe::config_detail {

optimizer_config read_optimizer(object_reader r) {
  using ok = optimizer_config::kind;
  optimizer_config o;
  o.type = r.choice<ok>(
    "type", ok::sgd,
    {{"sgd", ok::sgd}, {"momentum", ok::momentum}, {"adam", ok::adam}});
  o.learning_rate = r.number("learning_rate", o.type == ok::adam ? 0.001 : 0.01,
                             0, std::numeric_limits<double>::max(), true);
  if (o.type == ok::momentum) {
    o.momentum = r.number("momentum", 0.9, 0, 1);
    o.nesterov = r.boolean("nesterov", false);
  }
  if (o.type == ok::adam) {
    o.beta1 = r.number("beta1", 0.9, 0, 1);
    o.beta2 = r.number("beta2", 0.999, 0, 1);
    // A float in the update: a smaller one rounds to 0, and a weight
    // whose gradient stays 0 then divides 0 by 0.
    o.epsilon = r.number("epsilon", 1e-8, std::numeric_limits<float>::min(), 1);
  }
  o.weight_decay = r.number("weight_decay", 0, 0, 1e6);
  if (auto* s = r.find("schedule")) {
    auto sr = r.inner(*s, "schedule");
    using sk = lr_schedule::kind;
    o.schedule.type = sr.choice<sk>(
      "type", sk::constant,
      {{"constant", sk::constant}, {"exponential", sk::exponential}}, true);
    if (o.schedule.type == sk::exponential) {
      o.schedule.decay_steps = static_cast<double>(
        sr.integer("decay_steps", 1000, 1));
      o.schedule.decay_rate = sr.number("decay_rate", 0.96, 0, 1e6, true);
      o.schedule.staircase = sr.boolean("staircase", false);
    }
    sr.finish();
  }
  r.finish();
  return o;
}

sparse_optimizer_config read_sparse_optimizer(object_reader r) {
  using sk = sparse_optimizer_config::kind;
  sparse_optimizer_config o;
  o.type = r.choice<sk>(
    "type", sk::adagrad,
    {{"sgd", sk::sgd}, {"adagrad", sk::adagrad}, {"adam", sk::adam}});
  o.learning_rate = r.number("learning_rate", o.type == sk::adam ? 0.001 : 0.05,
                             0, std::numeric_limits<double>::max(), true);
  if (o.type == sk::adagrad)
    o.initial_accumulator = r.number("initial_accumulator", 0.1, 0, 1e6, true);
  if (o.type == sk::adam) {
    o.beta1 = r.number("beta1", 0.9, 0, 1);
    o.beta2 = r.number("beta2", 0.999, 0, 1);
    // A float in the update: a smaller one rounds to 0, and a weight
    // whose gradient stays 0 then divides 0 by 0.
    o.epsilon = r.number("epsilon", 1e-8, std::numeric_limits<float>::min(), 1);
  }
  r.finish();
  return o;
}

/// What a click model and click logs require of each other and of the
/// rest of the run; called once every section is read.

training_config read_training(object_reader r) {
  training_config t;
  t.batch_size = static_cast<int>(r.integer("batch_size", 128, 1, 1 << 20));
  t.epochs = static_cast<int>(r.integer("epochs", 10, 1, 1 << 20));
  t.max_steps = r.integer("max_steps", 0, 0);
  t.seed = static_cast<uint64_t>(r.integer("seed", 1, 0));
  t.partition = r.choice("data_partition", data_partition::shared,
                         {{"shared", data_partition::shared},
                          {"replicated", data_partition::replicated},
                          {"sharded", data_partition::sharded}});
  // Absent: 0, settled once the data section says how the set is read.
  t.shuffle_block = r.find("shuffle_block") != nullptr
                      ? r.integer("shuffle_block", 1, 1, int64_t{1} << 30)
                      : 0;
  t.stream_order = r.choice("order", false,
                            {{"shuffled", false}, {"stream", true}});
  if (auto* v = r.find("threads"); v != nullptr && v->is_string()) {
    if (v->get<std::string>() != "auto")
      fail(r.at("threads"), "an integer from 1 to 256 or \"auto\"", *v);
    t.threads = 0;
  } else {
    t.threads = static_cast<int>(r.integer("threads", 0, 1, 256));
  }
  t.device = read_device(r);
  t.log_every_steps = r.integer("log_every_steps", 100, 1);
  t.eval_every_steps = r.integer("eval_every_steps", 0, 0);
  if (auto* o = r.find("optimizer"))
    t.optimizer = read_optimizer(r.inner(*o, "optimizer"));
  if (auto* o = r.find("sparse_optimizer"))
    t.sparse_optimizer = read_sparse_optimizer(r.inner(*o, "sparse_optimizer"));
  if (auto* c = r.find("checkpoint")) {
    auto cr = r.inner(*c, "checkpoint");
    t.checkpoint.dir = cr.path("dir", "");
    if (t.checkpoint.dir.empty())
      throw config_error{errc::invalid_config, cr.at("dir"),
                         "missing required key \"dir\""};
    t.checkpoint.every_steps = cr.integer("every_steps", 0, 0);
    t.checkpoint.resume = cr.boolean("resume", true);
    t.checkpoint.keep = static_cast<int>(cr.integer("keep", 5, 0, 1 << 20));
    cr.finish();
  }
  if (auto* e = r.find("export")) {
    auto er = r.inner(*e, "export");
    t.exports.dir = er.path("dir", "");
    if (t.exports.dir.empty())
      throw config_error{errc::invalid_config, er.at("dir"),
                         "missing required key \"dir\""};
    t.exports.every_steps = er.integer("every_steps", 0, 0);
    t.exports.every_seconds = er.number("every_seconds", 0, 0, 1e9);
    t.exports.keep = static_cast<int>(er.integer("keep", 2, 1, 1 << 20));
    er.finish();
  }
  r.finish();
  return t;
}

} // namespace troupe::config_detail
