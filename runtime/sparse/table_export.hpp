// Exports of a run's embedding tables for serving: a folder (training.export
// .dir) of a full export, then deltas, each the rows changed and the keys
// evicted since the export before it, and a manifest naming them in order.
// Applying a full export and the deltas after it, in order, gives the table
// the shards held at the last one, bit for bit (read_exported_table; the
// same in Python: troupe.read_export).
//
// Files, all written before the manifest names them:
//   export-<S>.table.<name>.safetensors  each table's rows (table_file.hpp,
//                                        version 3: values only, and a
//                                        delta's tombstones)
//   export-<S>.safetensors               the dense parameters at that step
//                                        (a checkpoint's dense file)
//   manifest.json                        {"format": "troupe-exports",
//     "version": 1, "exports": [{"sequence": S, "kind": "full"|"delta",
//     "step": N, "time": unix seconds, "dense": file, "tables": {name:
//     file}, "rows": changed rows, "evicted": tombstones, "bytes": bytes of
//     the table files}, ...]} oldest first; replaced atomically.
//
// A chain is a full export and the deltas after it. A delta names, per
// part (shard), the push count of the export it follows ("since"), which
// must be the pushes the previous file recorded: a skipped or repeated
// delta is refused, naming the files. A new chain starts with a full export
// whenever the shards' rows were put back from a checkpoint or moved
// between shards (their push counts no longer continue the chain's).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "caf/error.hpp"
#include "caf/expected.hpp"

namespace troupe {

struct export_entry {
  int64_t sequence = 0;
  std::string kind; ///< "full" or "delta"
  int64_t step = 0;
  double time = 0;
  std::string dense;                         ///< file name; may be empty
  std::map<std::string, std::string> tables; ///< table -> file name
  uint64_t rows = 0, evicted = 0, bytes = 0;
};

struct export_manifest {
  std::vector<export_entry> exports; ///< oldest first
};

/// The manifest's path in export folder `dir`.
std::string export_manifest_path(const std::string& dir);

/// The file names of export `sequence`: its dense file and table `table`'s.
std::string export_dense_name(int64_t sequence);
std::string export_table_name(int64_t sequence, const std::string& table);

/// Reads `dir`'s manifest. errc::file_not_found when there is none;
/// errc::bad_format naming the file and the entry that is wrong.
caf::expected<export_manifest> read_export_manifest(const std::string& dir);

/// Writes `m` as `dir`'s manifest: a temporary file made durable, then
/// moved into place.
caf::error write_export_manifest(const std::string& dir,
                                 const export_manifest& m);

class sparse_table;

/// Writes the table file of export `sequence` of the shards' parts
/// `parts` of one table held in this process: full when `since` is
/// empty, else a delta of the rows each part changed after push since[p]
/// and the keys it evicted since (which it then forgets). What the chief
/// writes from shards in other processes, for a benchmark and tests.
/// Returns the manifest's entry, its rows, tombstones, bytes and table
/// file filled in (not yet in the manifest).
caf::expected<export_entry>
write_table_export(const std::string& dir,
                   const std::vector<sparse_table*>& parts, int64_t sequence,
                   const std::vector<int64_t>& since);

/// A table as a chain of exports leaves it: its rows by ascending id.
struct exported_table {
  std::string table;
  int dim = 0;
  uint64_t vocabulary = 0;
  int64_t sequence = -1; ///< the last export applied
  std::vector<uint64_t> ids;
  std::vector<float> values; ///< ids.size() x dim
};

/// Table `table` as of export `upto` (-1: the newest in the manifest):
/// the newest full export at or before it, then each delta after that up
/// to it. Errors name the file: a missing one, a delta that does not
/// follow the file before it, a table file of another table or dim.
caf::expected<exported_table> read_exported_table(const std::string& dir,
                                                  const std::string& table,
                                                  int64_t upto = -1);

} // namespace troupe
