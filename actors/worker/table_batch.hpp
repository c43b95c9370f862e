// A step's rows of an external model's embedding tables: each table's keys
// checked and made distinct, each distinct key asked of the shard that
// holds its row (one request per shard and table), the shards' answers put
// in the step's order, and the step's row gradients split back per shard.
// What click_batch is to a click model, without a model of its own: the
// user's step pools the rows. Private to actors/worker/.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/protocol/shard_data_messages.hpp"
#include "caf/expected.hpp"
#include "models/external_step.hpp"
#include "runtime/sparse/id_index.hpp"
#include "runtime/sparse/sparse_config.hpp"

namespace troupe {

/// One request of a step's plan: the places of its rows among its table's
/// distinct keys.
struct table_ask {
  int32_t shard = 0;
  int32_t table = 0;
  std::vector<uint32_t> positions;
};

/// One step's rows of every table, and what was asked of which shard: a
/// worker that pulls the next step's rows while this one computes keeps
/// two.
struct step_tables {
  std::vector<table_rows> rows;
  std::vector<table_ask> asked;
};

class table_batch {
public:
  table_batch(std::vector<table_setup> tables, int32_t shards);

  /// The shards moved: `shards` of them now.
  void set_shards(int32_t shards) { shards_ = shards; }

  /// One empty table_rows per table (index, name, dim set): what the
  /// step's batch_keys fills.
  std::vector<table_rows> start() const;

  /// Checks the keys of `step.rows` (each in [0, vocabulary) or -1), sets
  /// their unique and inverse, and returns the requests for their rows,
  /// one per shard and table that holds any (`worker` asks), kept in
  /// step.asked. errc::bad_step names the table, the sample (its index in
  /// the training set, from `batch`) and the key of the first key out of
  /// range, or a table whose keys do not fill a row of `width` per sample.
  caf::expected<std::vector<row_request>>
  plan(step_tables& step, const std::vector<uint32_t>& batch, int32_t worker);

  /// The answers to plan's requests, in their order, into each table's
  /// values; errc::wrong_size for an answer of other rows than asked.
  static caf::error take(const std::vector<row_block>& blocks,
                         step_tables& step);

  /// The step's row gradients (each table's grads), one push per request
  /// of its plan, tagged with `versions` (per shard) as the dense push.
  static std::vector<row_push> pushes(const step_tables& step, int32_t worker,
                                      int64_t batch,
                                      const std::vector<int64_t>& versions);

private:
  std::vector<table_setup> tables_;
  int32_t shards_;
  id_index scratch_;
};

} // namespace troupe
