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

class table_batch {
public:
  table_batch(std::vector<table_setup> tables, int32_t shards);

  /// The shards moved: `shards` of them now.
  void set_shards(int32_t shards) { shards_ = shards; }

  /// One empty table_rows per table (index, name, dim set): what the
  /// step's batch_keys fills.
  std::vector<table_rows> start() const;

  /// Checks the keys of `rows` (each in [0, vocabulary) or -1), sets their
  /// unique and inverse, and returns the requests for their rows, one per
  /// shard and table that holds any (`worker` asks). errc::bad_step names
  /// the table, the sample and the key of the first key out of range, or a
  /// table whose keys do not fill `samples` rows of `width`.
  caf::expected<std::vector<row_request>> plan(std::vector<table_rows>& rows,
                                               size_t samples, int32_t worker);

  /// The answers to plan's requests, in their order, into each table's
  /// values; errc::wrong_size for an answer of other rows than asked.
  caf::error take(const std::vector<row_block>& blocks,
                  std::vector<table_rows>& rows) const;

  /// The step's row gradients (each table's grads), one push per request
  /// of the plan, tagged with `versions` (per shard) as the dense push.
  std::vector<row_push> pushes(const std::vector<table_rows>& rows,
                               int32_t worker, int64_t batch,
                               const std::vector<int64_t>& versions) const;

  /// Distinct rows of the last plan, all tables together.
  size_t planned_rows() const { return planned_rows_; }

private:
  /// One request of the plan: its rows' places among the table's unique.
  struct asked {
    int32_t shard = 0;
    int32_t table = 0;
    std::vector<uint32_t> positions;
  };

  std::vector<table_setup> tables_;
  int32_t shards_;
  std::vector<asked> asked_;
  size_t planned_rows_ = 0;
  id_index scratch_;
};

} // namespace troupe
