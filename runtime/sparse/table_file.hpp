// An embedding table in a checkpoint: a safetensors file of its own beside
// the dense checkpoint, written and read piece by piece, so that neither
// the writer nor the reader ever holds the table in one buffer (a 50M-row
// table is gigabytes).
//
// Which files: a click model's one table is ckpt-N.tables.safetensors
// beside ckpt-N.safetensors (as it always was, so that its old checkpoints
// still resume); each table of an external model (/model/tables) is
// ckpt-N.table.<name>.safetensors. The dense file's metadata "tables"
// names them, comma-separated, in the order of the run's tables (a click
// model's: its one file); each file's own metadata "table" is its table's
// name.
//
// The rows are kept in parts (a part is one shard's rows when written;
// they are placed again by id when read, so a run may resume on another
// number of shards) and pieces of at most table_piece_rows rows. Tensors,
// in this order in the file, piece after piece:
//   "<table>/p<P>/k<K>/ids"     U64 [n]
//   "<table>/p<P>/k<K>/values"  F32 [n, dim]
//   "<table>/p<P>/k<K>/<slot>"  F32 [n, dim], for each optimizer slot
//   "<table>/p<P>/k<K>/ages"    I64 [n], a table that evicts: each row's
//                               pushes since its last push
//   "<table>/p<P>/k<K>/uses"    U32 [n], and its pushes
// and after a part's pieces, for a table that admits keys by count, the
// part's admission counts (runtime/sparse/admission_filter.hpp) in pieces
// of table_count_piece:
//   "<table>/p<P>/c<C>/counts"  U8 [n]
// __metadata__ (strings): format "troupe-tables", version "1" ("2" with
// ages and uses or counts), table, dim, vocabulary, optimizer, slots
// (comma-separated), parts (rows per part, comma-separated), pushes (per
// part, comma-separated: what Adam's bias correction counts), with ages
// rows "ages,uses", and with counts admission ("<counters>,<hashes>":
// each part's filter).
//
//
// An export (runtime/sparse/table_export.hpp) is a file of the same
// format, version "3", with metadata export ("full" or "delta"),
// sequence (its number in the export folder), evicted (per part, the
// keys evicted since the last export: a delta's tombstones) and, for a
// delta, since (per part, the push count of the export it follows; its
// rows are those changed after it). Its rows carry values alone (slots
// empty, no ages or counts), and after each part's rows come its
// tombstones in pieces of table_piece_rows:
//   "<table>/p<P>/e<E>/evicted"  U64 [n]
//
// A reader accepts exactly the header a writer of the same metadata writes,
// and refuses anything else naming the file and what differs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caf/expected.hpp"

namespace troupe {

/// Rows per piece: 4 MB of values at dim 16.
constexpr uint64_t table_piece_rows = 65536;
/// Admission counters per piece: 4 MB.
constexpr uint64_t table_count_piece = 4 << 20;

struct table_file_info {
  std::string table;
  int dim = 0;
  uint64_t vocabulary = 0;
  std::string optimizer;          ///< "sgd", "adagrad", "adam"
  std::vector<std::string> slots; ///< the optimizer's, in order
  std::vector<uint64_t> part_rows;
  std::vector<int64_t> part_pushes;
  /// Each row's age and pushes follow its slots (version 2).
  bool ages = false;
  /// Each part's admission counters and their hashes (0: none; version 2).
  uint64_t counters = 0;
  int hashes = 0;
  /// An export's (version 3): "full" or "delta" (empty: a checkpoint's),
  /// its sequence number, each part's tombstones, and a delta's push
  /// count of each part's previous export.
  std::string export_kind;
  int64_t sequence = 0;
  std::vector<uint64_t> part_evicted;
  std::vector<int64_t> part_since;
};

/// One piece of rows: ids, values and each slot (rows x dim floats each).
struct table_piece {
  size_t part = 0;
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;
  std::vector<int64_t> ages;  ///< with table_file_info::ages (rows entries)
  std::vector<uint32_t> uses; ///< likewise
  /// A piece of the part's admission counters instead of rows (ids
  /// empty): counters [counts_first, counts_first + counts.size()).
  std::vector<uint8_t> counts;
  uint64_t counts_first = 0;
  /// A piece of the part's tombstones instead (an export's; ids and
  /// counts empty).
  std::vector<uint64_t> evicted;
};

/// The tables file of a click model that belongs to the checkpoint at
/// `checkpoint_path`.
std::string tables_path_of(const std::string& checkpoint_path);

/// The file of table `table` (an external model's) that belongs to the
/// checkpoint at `checkpoint_path`.
std::string table_path_of(const std::string& checkpoint_path,
                          const std::string& table);

/// The table files a checkpoint's metadata "tables" names: its value
/// split at commas (empty: none).
std::vector<std::string> table_file_names(const std::string& tables);

/// Every table file beside the checkpoint at `checkpoint_path` that
/// belongs to it (either naming), whether or not its metadata can be
/// read: what goes wherever the checkpoint goes.
std::vector<std::string> table_files_beside(const std::string& checkpoint_path);

class table_file_writer {
public:
  /// Starts `path` (a temporary file beside it until finish()) and writes
  /// its header. errc::invalid_argument for metadata out of range,
  /// errc::io_error naming the file.
  static caf::expected<std::unique_ptr<table_file_writer>>
  create(const std::string& path, table_file_info info);

  /// Appends the next piece: part after part, each part's rows in pieces
  /// of table_piece_rows (its last one shorter), then an export's
  /// tombstones in pieces of as many (piece.evicted), then its counts in
  /// pieces of table_count_piece (piece.counts). errc::invalid_argument
  /// for a piece the header did not announce; errc::io_error.
  caf::error append(const table_piece& piece);

  /// Appends all of part `part`'s tombstones (an export's) as its
  /// pieces, split as the header has them.
  caf::error append_tombstones(size_t part, const std::vector<uint64_t>& ids);

  /// Makes the file durable and moves it into place; errc::invalid_argument
  /// when pieces are missing.
  caf::error finish();

  /// An unfinished file is removed.
  ~table_file_writer();

  class impl;
  explicit table_file_writer(std::unique_ptr<impl> p);

private:
  std::unique_ptr<impl> impl_;
};

class table_file_reader {
public:
  /// Opens `path` and checks its header (errc::file_not_found,
  /// errc::io_error, errc::bad_format naming the file and what is wrong).
  static caf::expected<std::unique_ptr<table_file_reader>>
  open(const std::string& path);

  const table_file_info& info() const;

  /// Reads the next piece into `out`; false after the last one. Errors
  /// (errc::bad_format, errc::io_error) name the file and the tensor: a
  /// short file, an id at or above the vocabulary, a value that is not
  /// finite.
  caf::expected<bool> next(table_piece& out);

  ~table_file_reader();

  class impl;
  explicit table_file_reader(std::unique_ptr<impl> p);

private:
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
