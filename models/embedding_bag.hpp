// The worker's side of an embedding lookup over click logs: which rows a
// batch needs (each once, so a worker pulls and pushes every row at most
// once per step, as TF's embedding_lookup_sparse gathers unique ids), and
// mean pooling of each (sample, field) bag of rows, forward and backward.
//
// All categorical fields share one table: click_token_id already mixes the
// field into the id, so one vocabulary serves them all, and one pull per
// step reaches every shard once.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/data/click_data.hpp"
#include "runtime/sparse/id_index.hpp"

namespace troupe {

struct bag_lookup {
  int samples = 0, fields = 0;
  std::vector<uint64_t> ids;      ///< every value's id, bag after bag
  std::vector<uint64_t> unique;   ///< the rows to pull, each once
  std::vector<uint32_t> position; ///< per value: its row in `unique`
  /// Bag b = sample * fields + field holds position[bags[b] .. bags[b + 1]).
  std::vector<uint32_t> bags;
};

/// The lookup for samples[0..n) of `d`; `scratch` is reused between calls.
void plan_lookup(const click_data& d, const uint32_t* samples, int n,
                 id_index& scratch, bag_lookup& out);

/// out (samples x fields x dim): each bag's mean row (zeros for an empty
/// bag) from rows (unique x dim), as pulled.
void pool_forward(const bag_lookup& lookup, const float* rows, int dim,
                  float* out);

/// grad_rows (unique x dim) = for every bag, its gradient (from grad_out,
/// shaped as pool_forward's out) divided by the bag's size, summed per row.
void pool_backward(const bag_lookup& lookup, const float* grad_out, int dim,
                   float* grad_rows);

} // namespace troupe
