// The settings of an embedding table and of the row-wise optimizer that
// updates it (runtime/sparse/sparse_table.hpp): plain structs, so that the run
// config can hold them without the table's code.
#pragma once

#include <cstdint>
#include <string>

namespace troupe {

/// Which keys get a row (DeepRec's CounterFilter and probability
/// admission, Persia's admit_probability): a key not admitted reads as a
/// row of zeros and the gradients pushed for it are dropped, so a key seen
/// once on an endless stream costs no memory beyond its count.
struct row_admission {
  enum class kind { all, min_count, probability };
  kind type = kind::all;
  /// min_count: a row is made on the push that brings the key's count of
  /// pushes to this (2..255), counted in a counting Bloom filter (see
  /// runtime/sparse/admission_filter.hpp) sized for `expected_keys`
  /// distinct keys per shard at `false_positive`.
  int min_count = 2;
  uint64_t expected_keys = 1000000;
  double false_positive = 0.01;
  /// probability: each push of an absent key makes its row with this
  /// probability (a draw from the table's seed, the key and the shard's
  /// push count, so a replica that applies the same pushes draws alike).
  double probability = 1.0;
};

/// Which rows go (DeepRec's GlobalStepEvict, TFRA's and HierarchicalKV's
/// capacity with LRU or LFU victims). Steps are the pushes the shard's
/// part of the table has taken: one per worker step whose batch has keys
/// there.
struct row_eviction {
  /// A row not pushed to for this many steps goes (0: never).
  int64_t steps_to_live = 0;
  /// A shard holds at most this many rows of the table (0: no limit):
  /// past it, the least recently pushed (lru) or least often pushed (lfu)
  /// rows go until 95% of it is left.
  uint64_t max_rows = 0;
  enum class policy { lru, lfu };
  policy victims = policy::lru;
  bool any() const { return steps_to_live > 0 || max_rows > 0; }
};

struct embedding_table_config {
  std::string name = "embedding";
  /// Ids are in [0, vocabulary): a reader hashes raw feature values into
  /// that range, so a vocabulary may be far larger than the rows ever
  /// touched (up to 2^40).
  uint64_t vocabulary = 0;
  int dim = 16;
  /// on_touch: a row is made the first time a pull or push names it;
  /// fixed: all `vocabulary` rows exist from the start (small vocabularies
  /// that are touched everywhere anyway).
  enum class rows { on_touch, fixed };
  rows create = rows::on_touch;
  /// Initial values uniform in [-init_scale, init_scale]: Keras' Embedding
  /// default (0.05), small enough that a sum of a few dozen rows starts
  /// near 0.
  double init_scale = 0.05;
  uint64_t seed = 1;
  row_admission admit;
  row_eviction evict;
  /// Rows keep the push that last changed them, and the table logs the
  /// keys it evicts: what a delta export (the rows changed and the keys
  /// evicted since the last one) is cut from. Set for every table of a
  /// run that exports (training.export).
  bool changes = false;
  /// Whether each row keeps its age and push count (eviction, exports),
  /// which a checkpoint then holds.
  bool keeps_ages() const { return evict.any() || changes; }
};

struct sparse_optimizer_config {
  enum class kind { sgd, adagrad, adam };
  kind type = kind::adagrad;
  double learning_rate = 0.05;
  /// adagrad: the accumulator's start (TF's AdagradOptimizer default 0.1).
  double initial_accumulator = 0.1;
  /// adam (lazy: m and v of the pushed rows only; the bias correction
  /// counts the table's pushes, as LazyAdam counts global steps).
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

/// A table and the optimizer that updates its rows: what a shard makes.
struct table_setup {
  embedding_table_config table;
  sparse_optimizer_config optimizer;
};

/// "sgd", "adagrad", "adam".
const char* to_string(sparse_optimizer_config::kind k);

} // namespace troupe
