// The settings of an embedding table and of the row-wise optimizer that
// updates it (runtime/sparse/sparse_table.hpp): plain structs, so that the run
// config can hold them without the table's code.
#pragma once

#include <cstdint>
#include <string>

namespace troupe {

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
