#include "models/export_scoring.hpp"

#include <algorithm>
#include <numeric>

#include "models/click_batch.hpp"
#include "models/model.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/config/config.hpp"
#include "runtime/config/run_identity.hpp"
#include "runtime/data/click_data.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/table_export.hpp"

namespace troupe {

namespace {

/// Samples per forward pass.
constexpr int score_batch = 8192;

/// The whole of `text` as an unsigned number, or false.
bool whole_number(const std::string& text, uint64_t& out) {
  if (text.empty() || text.size() > 19
      || !std::all_of(text.begin(), text.end(),
                      [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  out = std::stoull(text);
  return true;
}

} // namespace

caf::expected<export_scores>
score_clicks_from_export(const std::string& dir, int64_t sequence,
                         const std::string& input) {
  auto m = read_export_manifest(dir);
  if (!m)
    return m.error();
  const export_entry* e = nullptr;
  for (auto& x : m->exports)
    if (sequence < 0 || x.sequence == sequence)
      e = &x;
  auto manifest = export_manifest_path(dir);
  if (e == nullptr)
    return make_error(errc::file_not_found,
                      manifest + ": no export "
                        + (sequence < 0 ? std::string{"at all"}
                                        : std::to_string(sequence)));
  if (e->dense.empty() || e->tables.size() != 1)
    return make_error(errc::bad_format,
                      manifest + ": export " + std::to_string(e->sequence)
                        + " is not a click model's (one table and a dense "
                          "file)");
  auto dense_path = dir + "/" + e->dense;
  auto ck = read_checkpoint(dense_path);
  if (!ck)
    return ck.error();
  auto bad = [&](const std::string& what) {
    return make_error(errc::bad_format, dense_path + ": " + what);
  };
  auto config = ck->metadata.find("config");
  if (config == ck->metadata.end())
    return bad("it records no config");
  auto id = parse_identity(config->second);
  auto at = [&](const std::string& key) {
    auto it = id.find(key);
    return it == id.end() ? std::string{} : it->second;
  };
  if (at("/model/type") != "click")
    return bad("a model of type \"" + at("/model/type")
               + "\", not a click model");
  uint64_t numeric = 0, categorical = 0, vocabulary = 0, dim = 0, seed = 0;
  auto hidden = identity_int_list(at("/model/hidden"));
  model_config mc;
  mc.type = model_config::kind::click;
  if (!whole_number(at("/data/numeric"), numeric)
      || !whole_number(at("/data/categorical"), categorical)
      || !whole_number(at("/data/vocabulary"), vocabulary)
      || !whole_number(at("/model/embedding/dim"), dim)
      || !whole_number(at("/model/seed"), seed) || !hidden || categorical == 0
      || dim == 0 || dim > 1024 || numeric > (1 << 16)
      || categorical > (1 << 16))
    return bad("its config does not describe a click model (numeric, "
               "categorical, vocabulary, embedding dim, seed, hidden)");
  mc.hidden = *hidden;
  mc.seed = seed;
  mc.table.dim = static_cast<int>(dim);
  mc.table_fields = static_cast<int>(categorical);
  click_schema schema;
  schema.numeric = static_cast<int>(numeric);
  schema.categorical = static_cast<int>(categorical);
  schema.vocabulary = vocabulary;
  auto be = make_cpu_backend(1);
  auto made = make_model(mc, 1, schema.numeric, 1, 2, *be);
  if (!made)
    return made.error();
  auto& net = **made;
  if (auto err = check_layout(*ck, net.layout(), dense_path))
    return err;
  net.set_params(ck->params.data());
  // The rows the chain leaves, in a table that reads a key it lacks as
  // the run's evaluation did.
  auto table_name = e->tables.begin()->first;
  auto rows = read_exported_table(dir, table_name, e->sequence);
  if (!rows)
    return rows.error();
  embedding_table_config t;
  t.name = table_name;
  t.vocabulary = rows->vocabulary;
  t.dim = rows->dim;
  t.changes = true; // makes no row on a read
  uint64_t table_seed = 1;
  if (auto s = ck->metadata.find("table_seed"); s != ck->metadata.end())
    whole_number(s->second, table_seed);
  t.seed = table_seed;
  if (auto s = ck->metadata.find("table_init_scale"); s != ck->metadata.end())
    t.init_scale = std::stod(s->second);
  if (auto s = ck->metadata.find("absent_rows");
      s != ck->metadata.end() && s->second == "zeros") {
    t.admit.type = row_admission::kind::probability; // reads zeros
    t.admit.probability = 0;
  }
  if (rows->dim != mc.table.dim)
    return bad("rows of dim " + std::to_string(rows->dim) + " for a model of "
               + std::to_string(mc.table.dim));
  sparse_optimizer_config sgd;
  sgd.type = sparse_optimizer_config::kind::sgd;
  sparse_table table{t, sgd};
  const auto d = static_cast<size_t>(rows->dim);
  for (size_t i = 0; i < rows->ids.size(); ++i)
    if (auto err = table.restore_row(rows->ids[i], rows->values.data() + i * d,
                                     nullptr))
      return err;
  auto logs = load_click_log(input, schema);
  if (!logs)
    return logs.error();
  export_scores out;
  out.sequence = e->sequence;
  out.step = e->step;
  out.rows = rows->ids.size();
  out.count = logs->count;
  out.p.assign(static_cast<size_t>(logs->count), 0.5);
  click_batch batch{schema.numeric, schema.categorical, mc.table.dim, 1};
  std::vector<uint32_t> idx;
  std::vector<float> values, logits;
  for (int64_t first = 0; first < logs->count; first += score_batch) {
    auto n = static_cast<int>(
      std::min<int64_t>(score_batch, logs->count - first));
    idx.resize(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), static_cast<uint32_t>(first));
    batch.plan(*logs, logs->numeric.data(), idx.data(), n);
    auto& ids = batch.ids(0);
    values.resize(ids.size() * d);
    if (auto err = table.peek(ids.data(), ids.size(), values.data()))
      return err;
    batch.set_rows(0, values.data());
    logits.resize(static_cast<size_t>(n) * 2);
    net.logits(batch.inputs(), n, logits.data());
    for (int s = 0; s < n; ++s)
      out.p[static_cast<size_t>(first + s)] = click_probability(
        logits.data() + 2 * static_cast<size_t>(s));
  }
  out.log_loss = log_loss(out.p, logs->labels);
  out.auc = roc_auc(out.p, logs->labels);
  return out;
}

} // namespace troupe
