// An embedding table's checkpoint file (runtime/sparse/table_file): tables
// spread over parts written piece by piece read back row for row, slots and
// push counts included; bad files and bad pieces are refused, naming the file
// and what is wrong; an unfinished file leaves nothing behind.
#include "runtime/sparse/table_file.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "runtime/base/errc.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

embedding_table_config table_of(uint64_t vocabulary, int dim) {
  embedding_table_config t;
  t.name = "embedding";
  t.vocabulary = vocabulary;
  t.dim = dim;
  return t;
}

/// Writes `parts` (one table per part) to `path`, piece by piece.
caf::error write_tables(const std::string& path,
                        const std::vector<sparse_table*>& parts) {
  table_file_info info;
  info.table = "embedding";
  info.dim = parts[0]->dim();
  info.vocabulary = parts[0]->table().vocabulary;
  info.optimizer = to_string(parts[0]->optimizer().type);
  info.slots = parts[0]->slot_names();
  info.ages = parts[0]->keeps_ages();
  for (auto* t : parts) {
    info.part_rows.push_back(t->rows());
    info.part_pushes.push_back(t->pushes());
  }
  auto w = table_file_writer::create(path, info);
  if (!w)
    return w.error();
  const auto dim = static_cast<size_t>(info.dim);
  for (size_t p = 0; p < parts.size(); ++p)
    for (size_t first = 0; first < parts[p]->rows();
         first += table_piece_rows) {
      auto n = std::min<size_t>(table_piece_rows, parts[p]->rows() - first);
      table_piece piece;
      piece.part = p;
      piece.ids.resize(n);
      piece.values.resize(n * dim);
      piece.slots.assign(info.slots.size(), std::vector<float>(n * dim));
      std::vector<float*> slots;
      for (auto& s : piece.slots)
        slots.push_back(s.data());
      if (info.ages) {
        piece.ages.resize(n);
        piece.uses.resize(n);
      }
      parts[p]->copy_rows(first, n, piece.ids.data(), piece.values.data(),
                          slots.data(), info.ages ? piece.ages.data() : nullptr,
                          info.ages ? piece.uses.data() : nullptr);
      if (auto err = (*w)->append(piece))
        return err;
    }
  return (*w)->finish();
}

std::string bytes_of(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>(in), {}};
}

void put_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream{path, std::ios::binary | std::ios::trunc} << bytes;
}

/// The error of reading `path` to its end; empty when it reads.
std::string read_error(const std::string& path) {
  auto r = table_file_reader::open(path);
  if (!r)
    return describe(r.error());
  table_piece piece;
  for (;;) {
    auto more = (*r)->next(piece);
    if (!more)
      return describe(more.error());
    if (!*more)
      return {};
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(table_file)

BOOST_AUTO_TEST_CASE(a_table_in_parts_reads_back_row_for_row) {
  temp_dir dir;
  sparse_optimizer_config adagrad;
  adagrad.type = sparse_optimizer_config::kind::adagrad;
  // Two parts, one of more than two pieces, trained a little so values
  // and accumulators differ from their start; one empty part.
  sparse_table a{table_of(1 << 20, 4), adagrad};
  sparse_table b{table_of(1 << 20, 4), adagrad};
  sparse_table empty{table_of(1 << 20, 4), adagrad};
  std::mt19937_64 rng{5};
  std::vector<uint64_t> ids(150000);
  for (auto& id : ids)
    id = rng() % (1 << 20);
  std::vector<float> g(ids.size() * 4, 0.25f);
  BOOST_REQUIRE(!a.push(ids.data(), ids.size(), g.data()));
  BOOST_REQUIRE(!b.push(ids.data(), 1000, g.data()));
  BOOST_REQUIRE(!b.push(ids.data() + 500, 1000, g.data()));
  BOOST_REQUIRE(a.rows() > 2 * table_piece_rows);
  auto path = dir.file("ckpt-7.tables.safetensors");
  BOOST_REQUIRE(tables_path_of(dir.file("ckpt-7.safetensors")) == path);
  auto err = write_tables(path, {&a, &empty, &b});
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  auto r = table_file_reader::open(path);
  BOOST_REQUIRE_MESSAGE(r, why(r));
  auto& info = (*r)->info();
  BOOST_TEST(info.part_rows == (std::vector<uint64_t>{a.rows(), 0, b.rows()}));
  BOOST_TEST(info.part_pushes == (std::vector<int64_t>{1, 0, 2}));
  BOOST_TEST(info.slots == (std::vector<std::string>{"accumulator"}));
  sparse_table a2{table_of(1 << 20, 4), adagrad},
    b2{table_of(1 << 20, 4), adagrad};
  sparse_table* into[] = {&a2, nullptr, &b2};
  table_piece piece;
  size_t pieces = 0;
  for (;;) {
    auto more = (*r)->next(piece);
    BOOST_REQUIRE_MESSAGE(more, why(more));
    if (!*more)
      break;
    ++pieces;
    BOOST_REQUIRE(into[piece.part] != nullptr);
    for (size_t i = 0; i < piece.ids.size(); ++i) {
      const float* slot = piece.slots[0].data() + i * 4;
      BOOST_REQUIRE(!into[piece.part]->restore_row(
        piece.ids[i], piece.values.data() + i * 4, &slot));
    }
  }
  auto pieces_of = [](const sparse_table& t) {
    return (t.rows() + table_piece_rows - 1) / table_piece_rows;
  };
  BOOST_TEST(pieces == pieces_of(a) + pieces_of(b)); // 3 + 1
  for (auto [from, to] : {std::pair{&a, &a2}, std::pair{&b, &b2}}) {
    BOOST_TEST(to->rows() == from->rows());
    bool same = true;
    from->for_each_row([&](uint64_t id, const float* v, const float* const* s) {
      const float* w = to->row(id);
      same = same && w && std::equal(v, v + 4, w);
      (void)s;
    });
    BOOST_TEST(same);
  }
  // The accumulators too: one more identical push moves both alike.
  BOOST_REQUIRE(!a.push(ids.data(), 10, g.data()));
  BOOST_REQUIRE(!a2.push(ids.data(), 10, g.data()));
  BOOST_TEST(std::equal(a.row(ids[3]), a.row(ids[3]) + 4, a2.row(ids[3])));
}

BOOST_AUTO_TEST_CASE(a_table_that_evicts_keeps_its_rows_ages) {
  temp_dir dir;
  auto cfg = table_of(1 << 20, 2);
  cfg.evict.steps_to_live = 40;
  cfg.evict.victims = row_eviction::policy::lfu;
  cfg.evict.max_rows = 1000;
  sparse_optimizer_config sgd;
  sgd.type = sparse_optimizer_config::kind::sgd;
  sparse_table a{cfg, sgd};
  // Row r pushed at steps r, r + 10, r + 20, ...: ages 0..9, uses 1..
  std::vector<float> g(2, 1.f);
  for (uint64_t step = 0; step < 30; ++step) {
    uint64_t id = step % 10;
    BOOST_REQUIRE(!a.push(&id, 1, g.data()));
  }
  auto path = dir.file("ckpt-3.table.items.safetensors");
  auto err = write_tables(path, {&a});
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  // Version 2: ages and uses after each piece's slots.
  BOOST_TEST(bytes_of(path).find("\"version\":\"2\"") != std::string::npos);
  auto r = table_file_reader::open(path);
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_TEST((*r)->info().ages);
  table_piece piece;
  BOOST_REQUIRE(*(*r)->next(piece));
  BOOST_REQUIRE(piece.ages.size() == 10u);
  sparse_table b{cfg, sgd};
  b.set_pushes((*r)->info().part_pushes[0]);
  for (size_t i = 0; i < piece.ids.size(); ++i) {
    BOOST_TEST(piece.ages[i] == static_cast<int64_t>(9 - piece.ids[i]));
    BOOST_TEST(piece.uses[i] == 3u);
    BOOST_REQUIRE(!b.restore_row(piece.ids[i], piece.values.data() + i * 2,
                                 nullptr, piece.ages[i], piece.uses[i]));
  }
  // Restored with their ages, the rows go as they would have gone: at the
  // sweeps every 10 pushes after the restore at push 30, row 0 (last
  // pushed at 21) is past 40 at push 70, row 9 (at 30) is not.
  for (int step = 0; step < 45; ++step) {
    uint64_t id = 500;
    BOOST_REQUIRE(!b.push(&id, 1, g.data()));
  }
  BOOST_TEST(b.row(0) == nullptr);
  BOOST_TEST(b.row(9) != nullptr);
  // A negative age is refused, naming the tensor.
  auto bytes = bytes_of(path);
  auto header = bytes.find("embedding/p0/k0/ages");
  BOOST_REQUIRE(header != std::string::npos);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  auto at = bytes.find("\"data_offsets\":[", header) + 16;
  auto begin = std::stoull(bytes.substr(at, 20));
  int64_t minus = -3;
  bytes.replace(8 + len + begin, 8, reinterpret_cast<const char*>(&minus), 8);
  put_bytes(path, bytes);
  BOOST_TEST(read_error(path).find("embedding/p0/k0/ages holds a negative age")
               != std::string::npos,
             read_error(path));
}

BOOST_AUTO_TEST_CASE(a_part_s_admission_counts_follow_its_rows) {
  temp_dir dir;
  table_file_info info;
  info.table = "users";
  info.dim = 2;
  info.vocabulary = 1000;
  info.optimizer = "sgd";
  info.part_rows = {1, 0};
  info.part_pushes = {3, 0};
  info.counters = table_count_piece + 10; // two pieces a part
  info.hashes = 7;
  auto path = dir.file("ckpt-1.table.users.safetensors");
  auto w = table_file_writer::create(path, info);
  BOOST_REQUIRE_MESSAGE(w, why(w));
  table_piece rows;
  rows.part = 0;
  rows.ids = {5};
  rows.values = {0.5f, -0.5f};
  // Counts before the part's rows are refused.
  table_piece counts;
  counts.part = 0;
  counts.counts.assign(table_count_piece, 1);
  BOOST_TEST(describe((*w)->append(counts)).find("is not users/p0/k0/ids")
             != std::string::npos);
  BOOST_REQUIRE(!(*w)->append(rows));
  for (size_t part : {0, 1}) {
    counts.part = part;
    counts.counts.assign(table_count_piece, static_cast<uint8_t>(part + 1));
    BOOST_REQUIRE(!(*w)->append(counts));
    counts.counts.assign(10, 9);
    BOOST_REQUIRE(!(*w)->append(counts));
  }
  BOOST_REQUIRE(!(*w)->finish());
  auto r = table_file_reader::open(path);
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_TEST((*r)->info().counters == table_count_piece + 10);
  BOOST_TEST((*r)->info().hashes == 7);
  table_piece piece;
  std::vector<std::tuple<size_t, uint64_t, size_t, int>> seen;
  while (*(*r)->next(piece))
    seen.emplace_back(
      piece.part, piece.counts.empty() ? piece.ids.size() : piece.counts_first,
      piece.counts.size(), piece.counts.empty() ? -1 : piece.counts.back());
  using row = std::tuple<size_t, uint64_t, size_t, int>;
  BOOST_TEST(
    (seen
     == std::vector<row>{row{0, 1, 0, -1}, row{0, 0, table_count_piece, 1},
                         row{0, table_count_piece, 10, 9},
                         row{1, 0, table_count_piece, 2},
                         row{1, table_count_piece, 10, 9}}));
  // Metadata that makes no filter is refused.
  auto bytes = bytes_of(path);
  auto at = bytes.find("\"admission\":\"");
  BOOST_REQUIRE(at != std::string::npos);
  bytes.replace(bytes.find(",7\"", at), 3, ",x\"");
  put_bytes(path, bytes);
  BOOST_TEST(read_error(path).find("metadata admission is not")
               != std::string::npos,
             read_error(path));
}

BOOST_AUTO_TEST_CASE(bad_files_are_refused_naming_the_file) {
  temp_dir dir;
  sparse_optimizer_config sgd;
  sgd.type = sparse_optimizer_config::kind::sgd;
  sparse_table t{table_of(100, 2), sgd};
  std::vector<uint64_t> ids{1, 2, 3};
  std::vector<float> g(6, 1.f);
  BOOST_REQUIRE(!t.push(ids.data(), ids.size(), g.data()));
  auto good = dir.file("good.safetensors");
  BOOST_REQUIRE(!write_tables(good, {&t}));
  BOOST_TEST(read_error(good).empty());
  auto bytes = bytes_of(good);
  auto bad = dir.file("bad.safetensors");
  auto refused = [&](const std::string& content, const std::string& part) {
    put_bytes(bad, content);
    auto e = read_error(bad);
    BOOST_TEST(e.find(bad + ": ") == 0, e);
    BOOST_TEST(e.find(part) != std::string::npos, e << " lacks " << part);
  };
  refused(bytes.substr(0, bytes.size() - 4), "the metadata announces more "
                                             "rows than the file holds");
  refused(bytes + "xxxx", "the tensors end at byte");
  refused("", "truncated");
  // An id outside the vocabulary, and a value that is not finite.
  auto data_at = bytes.size() - 3 * 8 - 3 * 2 * 4;
  auto with_id = bytes;
  uint64_t big = 100;
  std::memcpy(with_id.data() + data_at + 8, &big, 8);
  refused(with_id, "embedding/p0/k0/ids holds id 100, not below the "
                   "vocabulary (100)");
  auto with_nan = bytes;
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(with_nan.data() + bytes.size() - 4, &nan, 4);
  refused(with_nan, "embedding/p0/k0/values holds a value that is not finite");
  // The metadata and the tensors must agree.
  auto moved = bytes;
  auto pos = moved.find("\"parts\":\"3\"");
  BOOST_REQUIRE(pos != std::string::npos);
  moved[pos + 9] = '2';
  refused(moved, "is missing or not where its metadata puts it");
  auto other = bytes;
  pos = other.find("troupe-tables");
  other[pos] = 'x';
  refused(other, "not a troupe tables file");
  BOOST_TEST(read_error(dir.file("none.safetensors")).find("no such file")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_writer_takes_only_the_pieces_it_announced) {
  temp_dir dir;
  table_file_info info;
  info.table = "embedding";
  info.dim = 2;
  info.vocabulary = 10;
  info.optimizer = "sgd";
  info.part_rows = {2};
  info.part_pushes = {1};
  auto path = dir.file("t.safetensors");
  {
    auto w = table_file_writer::create(path, info);
    BOOST_REQUIRE_MESSAGE(w, why(w));
    table_piece wrong;
    wrong.ids = {1};
    wrong.values = {0.f, 0.f};
    auto err = (*w)->append(wrong);
    BOOST_TEST((err == errc::invalid_argument), describe(err));
    BOOST_TEST(describe(err).find("embedding/p0/k0/ids (2 rows)")
                 != std::string::npos,
               describe(err));
    err = (*w)->finish();
    BOOST_TEST((err == errc::invalid_argument), describe(err));
  } // never finished: nothing is left
  BOOST_TEST(!std::filesystem::exists(path));
  BOOST_TEST(std::filesystem::is_empty(dir.path()));
  info.dim = 0;
  auto w = table_file_writer::create(path, info);
  BOOST_REQUIRE(!w);
  BOOST_TEST(describe(w.error()).find("dim 0") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
