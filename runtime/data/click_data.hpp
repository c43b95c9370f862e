// Click logs in memory, and how they are read and made: a label (clicked or
// not), numeric fields and categorical fields whose values are hashed into
// per-field ids in [0, vocabulary), as a click-through model's embedding
// tables take them.
//
// The file format is the tab-separated one of the public click-log sets
// (Criteo's): one impression per line, `label \t n_1 .. n_K \t c_1 .. c_M`;
// a label is 0 or 1, a numeric field a decimal number or empty (missing:
// 0), a categorical field zero or more tokens separated by commas (empty:
// missing; several: a multi-valued field, pooled by the model). Tokens are
// any text without tab, comma or line break (the sets ship them as hex
// hashes) and are hashed again with their field, so a token means
// different things in different fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caf/expected.hpp"

namespace troupe {

struct click_schema {
  int numeric = 0;     ///< numeric fields per line
  int categorical = 0; ///< categorical fields per line
  /// Ids per categorical field after hashing (the embedding tables' rows).
  uint64_t vocabulary = uint64_t{1} << 24;
};

struct click_data {
  std::string source;
  click_schema schema;
  int64_t count = 0;
  std::vector<float> labels;  ///< count; 0 or 1
  std::vector<float> numeric; ///< count x schema.numeric
  /// Sample i's field f holds ids[offsets[i * F + f] .. offsets[i * F + f + 1])
  /// (F = schema.categorical), each in [0, vocabulary).
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> ids;

  /// Sample i's ids of field f.
  std::pair<const uint64_t*, const uint64_t*> field(int64_t i, int f) const {
    auto k = static_cast<size_t>(i) * static_cast<size_t>(schema.categorical)
             + static_cast<size_t>(f);
    return {ids.data() + offsets[k], ids.data() + offsets[k + 1]};
  }
};

/// The id of `token` in categorical field `field` (0-based): a 64-bit
/// hash of both, modulo the vocabulary.
uint64_t click_token_id(const char* token, size_t size, int field,
                        uint64_t vocabulary);

/// Reads a tab-separated click log of `schema`'s shape. Errors
/// (errc::bad_format, errc::file_not_found, errc::io_error) name the file,
/// the line and the column: a wrong number of columns, a label other than
/// 0 or 1, a number that is not one or is not finite, an empty token, a
/// line over 1 MiB, no lines at all.
caf::expected<click_data> load_click_log(const std::string& path,
                                         const click_schema& schema);

/// What generate_click_logs makes: click logs whose labels are drawn from a
/// planted model, so that the best log-loss a model can reach is known.
struct click_generator_config {
  click_schema schema{4, 8, uint64_t{1} << 24};
  int64_t train = 100000, test = 20000;
  /// Distinct raw values per categorical field, drawn with Zipf weights
  /// 1 / rank^zipf (rank 1 the most frequent).
  uint64_t values_per_field = 100000;
  double zipf = 1.1;
  /// The first `multi_valued` categorical fields hold 1 to `max_values`
  /// values per line (pooled by their mean in the planted model).
  int multi_valued = 1;
  int max_values = 3;
  /// The planted model: logit = bias + sum_k c_k x_k + sum_f mean(w_f) +
  /// sum_{f<g} <mean(e_f), mean(e_g)>, with per-value weights w and
  /// embeddings e of `planted_dim` drawn from the seed; x ~ N(0, 1).
  int planted_dim = 4;
  double bias = -1.0;
  uint64_t seed = 1;
  /// A stream that drifts: every 1000 lines each field's Zipf ranks move
  /// on to `drift` new raw values, so that a value is popular for a while
  /// and then fades, and the values ever seen grow with the stream (new
  /// users, new items). The test lines are drawn as the stream stands at
  /// the end of the training lines: they score what is popular then.
  /// 0: none.
  double drift = 0;
};

/// How well the planted model itself does on what was generated: the
/// floor a learned model approaches.
struct planted_scores {
  double train_log_loss = 0, test_log_loss = 0, test_auc = 0;
  double test_click_rate = 0;
};

/// Writes `train_path` and `test_path` as tab-separated click logs.
caf::expected<planted_scores>
generate_click_logs(const click_generator_config& cfg,
                    const std::string& train_path,
                    const std::string& test_path);

/// The same with the training lines split over `train_paths` in order
/// (parts of one stream, as hourly log files are), as evenly as they go.
caf::expected<planted_scores>
generate_click_logs(const click_generator_config& cfg,
                    const std::vector<std::string>& train_paths,
                    const std::string& test_path);

/// Mean log-loss of probabilities p for labels y (p clamped to
/// [1e-7, 1 - 1e-7], as Keras clamps).
double log_loss(const std::vector<double>& p, const std::vector<float>& y);

/// Area under the ROC curve of `scores` for labels y (ties counted half);
/// 0.5 when one class is absent.
double roc_auc(const std::vector<double>& scores, const std::vector<float>& y);

} // namespace troupe
