// A model troupe does not compute (model.type "external"), trained by the
// same workers, shards and chief as troupe's own: the parameters a user
// declared in a safetensors file, a step function of the user's that
// computes gradients for the leased sample indices, and checkpoints under
// the user's tensor names.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>

#include "fixture.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/sparse/table_file.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

constexpr int features = 5;
constexpr int samples = 96;

/// The user's data: y = x . w* + b* plus a little noise, in their memory.
struct user_data {
  std::vector<float> x, y;
  user_data() {
    uint32_t state = 12345;
    auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return static_cast<float>(state >> 8) / static_cast<float>(1u << 24)
             - 0.5f;
    };
    for (int i = 0; i < samples; ++i) {
      float t = 0.3f;
      for (int j = 0; j < features; ++j) {
        x.push_back(next());
        t += x.back() * static_cast<float>(j + 1);
      }
      y.push_back(t + 0.01f * next());
    }
  }

  /// Mean squared error's gradient over `batch` at (w, b): what the user's
  /// own code computes; returns the loss sum.
  double gradient(const float* w, float b, const std::vector<uint32_t>& batch,
                  float* gw, float* gb) const {
    double loss = 0;
    std::fill(gw, gw + features, 0.f);
    *gb = 0;
    auto n = static_cast<float>(batch.size());
    for (auto s : batch) {
      float pred = b;
      for (int j = 0; j < features; ++j)
        pred += w[j] * x[s * features + j];
      float err = pred - y[s];
      loss += 0.5 * err * err;
      for (int j = 0; j < features; ++j)
        gw[j] += err * x[s * features + j] / n;
      *gb += err / n;
    }
    return loss;
  }
};

/// The user's step: reads the tensors by name, as the Python module's
/// step function gets them, and records the batches it was given.
struct linear_step : external_step {
  const user_data* data;
  std::mutex* mtx;
  std::vector<std::vector<uint32_t>>* batches;
  bool poison = false; ///< return a NaN loss

  caf::expected<batch_loss> step(const pulled_params& p,
                                 const std::vector<uint32_t>& batch,
                                 float* grads) override {
    std::vector<float> scratch_w, scratch_b;
    auto& ts = p.layout->tensors();
    const float* w = p.tensor(ts[0], scratch_w);
    const float* b = p.tensor(ts[1], scratch_b);
    batch_loss out;
    out.loss_sum = data->gradient(w, *b, batch, grads + ts[0].offset,
                                  grads + ts[1].offset);
    if (poison)
      out.loss_sum = std::nan("");
    std::lock_guard<std::mutex> guard{*mtx};
    batches->push_back(batch);
    return out;
  }
};

/// Each worker's step, recording into `batches`.
external_step_factory linear_steps(const user_data& data, std::mutex& mtx,
                                   std::vector<std::vector<uint32_t>>& batches,
                                   bool poison = false) {
  return [&data, &mtx, &batches, poison](int32_t) {
    auto s = std::make_shared<linear_step>();
    s->data = &data;
    s->mtx = &mtx;
    s->batches = &batches;
    s->poison = poison;
    return s;
  };
}

run_config external_run(const std::string& params_file) {
  run_config cfg = test::small_run(cluster_config::mode::sync, 1, 2);
  cfg.model = model_config{};
  cfg.model.type = model_config::kind::external;
  cfg.model.parameters = params_file;
  cfg.data = data_config{};
  cfg.data.format = data_config::kind::external;
  cfg.data.train_samples = samples;
  cfg.data.test_samples = 0;
  cfg.training.batch_size = 8;
  cfg.training.epochs = 3;
  cfg.training.optimizer.learning_rate = 0.2;
  return cfg;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Sample s's keys in table t: two per sample, so that a batch repeats
/// some (the gradient of a key sums over its occurrences).
int64_t key_of(uint32_t s, size_t t, size_t k) {
  return static_cast<int64_t>((s * (t == 0 ? 7u : 3u) + k * 11u) % 40u);
}

/// The user's step with embedding tables: the linear model plus, for each
/// table, the first two floats of each of the sample's rows
/// (pred += row[0] + row[1] * x0).
struct table_step : external_step {
  const user_data* data;

  caf::error batch_keys(const std::vector<uint32_t>& batch,
                        std::vector<table_rows>& tables) override {
    for (size_t t = 0; t < tables.size(); ++t) {
      tables[t].width = 2;
      tables[t].keys.clear();
      for (auto s : batch)
        for (size_t k = 0; k < 2; ++k)
          tables[t].keys.push_back(key_of(s, t, k));
    }
    return {};
  }

  // Never called: the model has tables.
  caf::expected<batch_loss>
  step(const pulled_params&, const std::vector<uint32_t>&, float*) override {
    return make_error(errc::bad_step, "a step of tables");
  }

  caf::expected<batch_loss> step(const pulled_params& p,
                                 const std::vector<uint32_t>& batch,
                                 float* grads,
                                 std::vector<table_rows>& tables) override {
    std::vector<float> scratch_w, scratch_b;
    auto& ts = p.layout->tensors();
    const float* w = p.tensor(ts[0], scratch_w);
    const float* b = p.tensor(ts[1], scratch_b);
    float* gw = grads + ts[0].offset;
    float* gb = grads + ts[1].offset;
    std::fill(gw, gw + features, 0.f);
    *gb = 0;
    auto n = static_cast<float>(batch.size());
    batch_loss out;
    for (size_t i = 0; i < batch.size(); ++i) {
      auto s = batch[i];
      const float* x = &data->x[s * features];
      float pred = *b;
      for (int j = 0; j < features; ++j)
        pred += w[j] * x[j];
      for (auto& t : tables)
        for (size_t k = 0; k < t.width; ++k) {
          auto row = static_cast<size_t>(t.inverse[i * t.width + k]);
          const float* v = t.values->data() + row * static_cast<size_t>(t.dim);
          pred += v[0] + v[1] * x[0];
        }
      float err = pred - data->y[s];
      out.loss_sum += 0.5 * err * err;
      for (int j = 0; j < features; ++j)
        gw[j] += err * x[j] / n;
      *gb += err / n;
      for (auto& t : tables)
        for (size_t k = 0; k < t.width; ++k) {
          auto row = static_cast<size_t>(t.inverse[i * t.width + k]);
          float* g = t.grads.data() + row * static_cast<size_t>(t.dim);
          g[0] += err / n;
          g[1] += err * x[0] / n;
        }
    }
    return out;
  }
};

/// An external run with two tables, "item" (adagrad) and "user" (sgd),
/// checkpointing into `dir`.
run_config table_run(const std::string& params_file, const std::string& dir,
                     int shards, int64_t max_steps) {
  auto cfg = external_run(params_file);
  cfg.cluster.shards = shards;
  cfg.training.max_steps = max_steps;
  cfg.training.checkpoint.dir = dir;
  for (auto* name : {"item", "user"}) {
    table_setup t;
    t.table.name = name;
    t.table.vocabulary = 40;
    t.table.dim = 4;
    t.table.seed = cfg.model.tables.size() + 5;
    if (cfg.model.tables.size() == 1)
      t.optimizer.type = sparse_optimizer_config::kind::sgd;
    cfg.model.tables.push_back(t);
  }
  return cfg;
}

/// Every row of a table file: id -> its values, then each slot's.
std::map<uint64_t, std::vector<float>> rows_in(const std::string& path) {
  std::map<uint64_t, std::vector<float>> out;
  auto r = table_file_reader::open(path);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  auto dim = static_cast<size_t>((*r)->info().dim);
  table_piece piece;
  for (;;) {
    auto more = (*r)->next(piece);
    BOOST_REQUIRE_MESSAGE(more, test::why(more));
    if (!*more)
      return out;
    for (size_t i = 0; i < piece.ids.size(); ++i) {
      auto& row = out[piece.ids[i]];
      auto at = [&](const std::vector<float>& v) {
        return v.begin() + static_cast<ptrdiff_t>(i * dim);
      };
      row.insert(row.end(), at(piece.values),
                 at(piece.values) + static_cast<ptrdiff_t>(dim));
      for (auto& slot : piece.slots)
        row.insert(row.end(), at(slot), at(slot) + static_cast<ptrdiff_t>(dim));
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(external_model)

BOOST_AUTO_TEST_CASE(
  an_external_model_trains_as_a_plain_sgd_loop_over_the_same_batches) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  // The weight vector is cut by the two shards' split (6 floats: 3 and 3):
  // the step reads it gathered, the bias in place.
  std::vector<float> w0{0.1f, -0.2f, 0.3f, 0.0f, 0.05f};
  test::write_user_safetensors(params, {{"linear.weight", "[1,5]", w0},
                                        {"linear.bias", "[]", {0.4f}}});
  auto cfg = external_run(params);
  cfg.training.checkpoint.dir = dir.file("ckpt");
  user_data data;
  std::mutex mtx;
  std::vector<std::vector<uint32_t>> batches;
  cluster_fixture f;
  f.external = linear_steps(data, mtx, batches);
  auto r = f.run(cfg);
  BOOST_REQUIRE_MESSAGE(r, test::why(r));
  BOOST_TEST(r->steps == 3 * samples / 8);
  BOOST_REQUIRE(batches.size() == static_cast<size_t>(r->steps));
  // Every sample once per epoch.
  for (int e = 0; e < 3; ++e) {
    std::vector<int> seen(samples, 0);
    for (int i = 0; i < samples / 8; ++i)
      for (auto s : batches[static_cast<size_t>(e * samples / 8 + i)])
        ++seen[s];
    BOOST_TEST(std::count(seen.begin(), seen.end(), 1) == samples);
  }
  // The same batches, in the same order, by hand.
  std::vector<float> w = w0;
  float b = 0.4f;
  for (auto& batch : batches) {
    std::vector<float> gw(features);
    float gb = 0;
    data.gradient(w.data(), b, batch, gw.data(), &gb);
    for (int j = 0; j < features; ++j)
      w[j] -= 0.2f * gw[j];
    b -= 0.2f * gb;
  }
  BOOST_REQUIRE(f.final_params.size() == 6u);
  for (int j = 0; j < features; ++j)
    BOOST_TEST(f.final_params[j] == w[j], boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(f.final_params[5] == b, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(w[4] > 2.f); // it learned: the planted weight is 5, w0 0.05
  // The checkpoint holds the user's names and shapes.
  auto files = list_checkpoints(cfg.training.checkpoint.dir);
  BOOST_REQUIRE(!files.empty());
  auto ck = read_checkpoint(files.front().path);
  BOOST_REQUIRE_MESSAGE(ck, test::why(ck));
  BOOST_TEST(ck->layout.tensors()[0].name == "linear.weight");
  BOOST_TEST((ck->layout.tensors()[0].dims == shape{1, 5}));
  BOOST_TEST(ck->layout.tensors()[1].name == "linear.bias");
  BOOST_TEST(ck->params == f.final_params);
  BOOST_TEST(ck->metadata["model"] == "external (2 tensors, 6 floats)");
}

// Each table to its own file beside the checkpoint, named in its
// metadata; a resume on another number of shards puts every row back on
// the shard that holds it now and trains bitwise what a run that was
// never interrupted does.
BOOST_AUTO_TEST_CASE(an_external_models_tables_resume_on_3_shards_bitwise) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  test::write_user_safetensors(params,
                               {{"w", "[5]", {0.1f, -0.2f, 0.3f, 0.0f, 0.05f}},
                                {"b", "[]", {0.4f}}});
  user_data data;
  auto steps = [&data](int32_t) {
    auto s = std::make_shared<table_step>();
    s->data = &data;
    return s;
  };
  auto ckpt = [&](const std::string& name, int64_t step) {
    return dir.file(name + "/ckpt-" + std::to_string(step) + ".safetensors");
  };
  cluster_fixture straight;
  straight.external = steps;
  straight.run_ok(table_run(params, dir.file("straight"), 2, 24));
  cluster_fixture first;
  first.external = steps;
  first.run_ok(table_run(params, dir.file("first"), 2, 12));
  auto head = read_checkpoint_metadata(ckpt("first", 12));
  BOOST_REQUIRE_MESSAGE(head, test::why(head));
  BOOST_TEST(head->metadata["tables"]
             == "ckpt-12.table.item.safetensors,"
                "ckpt-12.table.user.safetensors");
  auto item12 = rows_in(table_path_of(ckpt("first", 12), "item"));
  BOOST_TEST(!item12.empty());
  BOOST_TEST(item12.size() <= 40u);
  auto cp = "cp -r " + dir.file("first") + " " + dir.file("resumed");
  BOOST_REQUIRE(std::system(cp.c_str()) == 0);
  cluster_fixture resumed;
  resumed.external = steps;
  resumed.run_ok(table_run(params, dir.file("resumed"), 3, 24));
  auto log = resumed.log.str();
  BOOST_TEST(contains(log, "tables restored: " + std::to_string(item12.size())
                             + " rows from " + dir.file("resumed")
                             + "/ckpt-12.table" + ".item.safetensors"),
             log);
  BOOST_TEST(resumed.final_params == straight.final_params); // bitwise
  for (auto* table : {"item", "user"}) {
    BOOST_TEST_CONTEXT(table) {
      auto want = rows_in(table_path_of(ckpt("straight", 24), table));
      auto got = rows_in(table_path_of(ckpt("resumed", 24), table));
      BOOST_TEST(got.size() == want.size());
      BOOST_TEST((got == want)); // values and slots, bitwise
    }
  }
  // The rows moved on, and the checkpoint's own stayed what they were.
  BOOST_TEST((rows_in(table_path_of(ckpt("resumed", 24), "item")) != item12));
  BOOST_TEST((rows_in(table_path_of(ckpt("resumed", 12), "item")) == item12));
}

// A checkpoint whose table does not fit this run's config is refused,
// naming the file and the table.
BOOST_AUTO_TEST_CASE(a_table_file_of_another_dim_is_refused_naming_it) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  test::write_user_safetensors(params, {{"w", "[5]", {0, 0, 0, 0, 0}},
                                        {"b", "[]", {0}}});
  user_data data;
  auto steps = [&data](int32_t) {
    auto s = std::make_shared<table_step>();
    s->data = &data;
    return s;
  };
  cluster_fixture first;
  first.external = steps;
  first.run_ok(table_run(params, dir.file("ckpt"), 2, 4));
  // The same config but for the checkpoint's file of table "user":
  // written by hand with dim 8.
  auto file = table_path_of(dir.file("ckpt/ckpt-4.safetensors"), "user");
  table_file_info info;
  info.table = "user";
  info.dim = 8;
  info.vocabulary = 40;
  info.optimizer = "sgd";
  auto w = table_file_writer::create(file, info);
  BOOST_REQUIRE_MESSAGE(w, test::why(w));
  BOOST_REQUIRE(!(*w)->finish());
  cluster_fixture again;
  again.external = steps;
  auto r = again.run(table_run(params, dir.file("ckpt"), 2, 8));
  BOOST_REQUIRE(!r);
  auto text = describe(r.error());
  BOOST_TEST(contains(text, file + ": table \"user\" of dim 8"), text);
}

BOOST_AUTO_TEST_CASE(an_external_step_that_returns_nan_stops_the_run) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  test::write_user_safetensors(params, {{"w", "[5]", {0, 0, 0, 0, 0}},
                                        {"b", "[]", {0}}});
  user_data data;
  std::mutex mtx;
  std::vector<std::vector<uint32_t>> batches;
  cluster_fixture f;
  f.external = linear_steps(data, mtx, batches, true);
  auto r = f.run(external_run(params));
  BOOST_REQUIRE(!r);
  BOOST_TEST(describe(r.error()).find("the loss turned NaN")
               != std::string::npos,
             describe(r.error()));
}

BOOST_AUTO_TEST_CASE(
  a_node_without_a_step_function_cannot_run_an_external_model) {
  temp_dir dir;
  auto params = dir.file("model.safetensors");
  test::write_user_safetensors(params, {{"w", "[5]", {0, 0, 0, 0, 0}},
                                        {"b", "[]", {0}}});
  auto cfg = external_run(params);
  cfg.cluster.max_restarts = 1;
  cluster_fixture f;
  auto r = f.run(cfg);
  BOOST_REQUIRE(!r);
  BOOST_TEST(f.log.str().find("workers run the user's step function")
               != std::string::npos,
             f.log.str());
}

BOOST_AUTO_TEST_SUITE_END()
