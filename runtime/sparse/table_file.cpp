#include "runtime/sparse/table_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_io.hpp"

namespace troupe {

using json = nlohmann::json;
using namespace file_io;

namespace {

constexpr const char* format_name = "troupe-tables";
constexpr const char* format_version = "1";
constexpr const char* aged_format_version = "2";   ///< with ages and uses
constexpr const char* export_format_version = "3"; ///< an export
/// A piece's entries take about 300 bytes: 16 MB is 50,000 pieces, 3.3G
/// rows.
constexpr uint64_t max_header_bytes = 16 << 20;
constexpr size_t max_parts = 4096;
constexpr int max_dim = 4096;

/// One tensor of the file, where the header puts it.
struct tensor_entry {
  std::string name;
  /// U64 [n] ids, F32 [n, dim] values or slot, I64 [n] ages, U32 [n]
  /// uses, U8 [n] admission counts, U64 [n] an export's tombstones.
  enum kind_t { ids, floats, ages, uses, counts, evicted } kind = floats;
  uint64_t rows = 0;
  uint64_t begin = 0, end = 0; ///< offsets in the data section
};

/// The tensors of each piece: ids, values, each slot, and ages and uses.
size_t tensors_per_piece(const table_file_info& info) {
  return 2 + info.slots.size() + (info.ages ? 2 : 0);
}

/// The tensors of a file with `info`, in file order: what the writer
/// writes and the only thing the reader accepts.
std::vector<tensor_entry> layout_of(const table_file_info& info) {
  std::vector<tensor_entry> out;
  uint64_t at = 0;
  const auto row_bytes = static_cast<uint64_t>(info.dim) * sizeof(float);
  for (size_t p = 0; p < info.part_rows.size(); ++p) {
    uint64_t rows = info.part_rows[p];
    for (uint64_t k = 0; k * table_piece_rows < rows; ++k) {
      auto n = std::min(table_piece_rows, rows - k * table_piece_rows);
      auto prefix = info.table + "/p" + std::to_string(p) + "/k"
                    + std::to_string(k) + "/";
      out.push_back({prefix + "ids", tensor_entry::ids, n, at, at + n * 8});
      at += n * 8;
      for (size_t s = 0; s <= info.slots.size(); ++s) {
        auto name = s == 0 ? std::string{"values"} : info.slots[s - 1];
        out.push_back(
          {prefix + name, tensor_entry::floats, n, at, at + n * row_bytes});
        at += n * row_bytes;
      }
      if (info.ages) {
        out.push_back({prefix + "ages", tensor_entry::ages, n, at, at + n * 8});
        at += n * 8;
        out.push_back({prefix + "uses", tensor_entry::uses, n, at, at + n * 4});
        at += n * 4;
      }
    }
    uint64_t gone = p < info.part_evicted.size() ? info.part_evicted[p] : 0;
    for (uint64_t e = 0; e * table_piece_rows < gone; ++e) {
      auto n = std::min(table_piece_rows, gone - e * table_piece_rows);
      out.push_back({info.table + "/p" + std::to_string(p) + "/e"
                       + std::to_string(e) + "/evicted",
                     tensor_entry::evicted, n, at, at + n * 8});
      at += n * 8;
    }
    for (uint64_t c = 0; c * table_count_piece < info.counters; ++c) {
      auto n = std::min(table_count_piece,
                        info.counters - c * table_count_piece);
      out.push_back({info.table + "/p" + std::to_string(p) + "/c"
                       + std::to_string(c) + "/counts",
                     tensor_entry::counts, n, at, at + n});
      at += n;
    }
  }
  return out;
}

template <class T>
std::string joined(const std::vector<T>& v) {
  std::ostringstream out;
  for (size_t i = 0; i < v.size(); ++i)
    out << (i ? "," : "") << v[i];
  return out.str();
}

/// What is wrong with `info` for a file; empty when nothing is.
std::string check_info(const table_file_info& info) {
  if (info.table.empty() || info.table.find('/') != std::string::npos)
    return "a table name without '/' is needed";
  if (info.dim < 1 || info.dim > max_dim)
    return "dim " + std::to_string(info.dim) + " is not in [1, "
           + std::to_string(max_dim) + "]";
  if (info.vocabulary < 1)
    return "vocabulary 0";
  if (info.part_rows.size() > max_parts
      || info.part_pushes.size() != info.part_rows.size())
    return std::to_string(info.part_rows.size()) + " parts with "
           + std::to_string(info.part_pushes.size()) + " push counts (at most "
           + std::to_string(max_parts) + ")";
  for (auto& s : info.slots)
    if (s != "accumulator" && s != "m" && s != "v")
      return "unknown optimizer slot \"" + s + "\"";
  for (auto p : info.part_pushes)
    if (p < 0)
      return "a negative push count";
  if ((info.counters > 0) != (info.hashes > 0) || info.hashes > 16
      || info.counters > (uint64_t{1} << 40))
    return "admission counters " + std::to_string(info.counters) + " with "
           + std::to_string(info.hashes) + " hashes";
  if (info.export_kind.empty()) {
    if (!info.part_evicted.empty() || !info.part_since.empty())
      return "tombstones or since in a file that is not an export";
    return {};
  }
  if (info.export_kind != "full" && info.export_kind != "delta")
    return "export \"" + info.export_kind + "\" is not \"full\" or \"delta\"";
  if (!info.slots.empty() || info.ages || info.counters > 0)
    return "an export with optimizer slots, ages or admission counts";
  if (info.sequence < 0)
    return "a negative export sequence";
  if (info.part_evicted.size() != info.part_rows.size())
    return std::to_string(info.part_evicted.size()) + " tombstone counts for "
           + std::to_string(info.part_rows.size()) + " parts";
  const bool delta = info.export_kind == "delta";
  if (info.part_since.size() != (delta ? info.part_rows.size() : 0))
    return std::to_string(info.part_since.size()) + " since counts in a "
           + info.export_kind + " export of "
           + std::to_string(info.part_rows.size()) + " parts";
  for (size_t p = 0; p < info.part_since.size(); ++p)
    if (info.part_since[p] < 0 || info.part_since[p] > info.part_pushes[p])
      return "part " + std::to_string(p) + " follows push "
             + std::to_string(info.part_since[p]) + ", not one up to its "
             + std::to_string(info.part_pushes[p]);
  if (!delta)
    for (auto e : info.part_evicted)
      if (e != 0)
        return "tombstones in a full export";
  return {};
}

json header_of(const table_file_info& info,
               const std::vector<tensor_entry>& layout) {
  json header = json::object();
  const char* version = !info.export_kind.empty()        ? export_format_version
                        : info.ages || info.counters > 0 ? aged_format_version
                                                         : format_version;
  header["__metadata__"] = {{"format", format_name},
                            {"version", version},
                            {"table", info.table},
                            {"dim", std::to_string(info.dim)},
                            {"vocabulary", std::to_string(info.vocabulary)},
                            {"optimizer", info.optimizer},
                            {"slots", joined(info.slots)},
                            {"parts", joined(info.part_rows)},
                            {"pushes", joined(info.part_pushes)}};
  if (info.ages)
    header["__metadata__"]["rows"] = "ages,uses";
  if (info.counters > 0)
    header["__metadata__"]["admission"] = std::to_string(info.counters) + ","
                                          + std::to_string(info.hashes);
  if (!info.export_kind.empty()) {
    auto& meta = header["__metadata__"];
    meta["export"] = info.export_kind;
    meta["sequence"] = std::to_string(info.sequence);
    meta["evicted"] = joined(info.part_evicted);
    if (!info.part_since.empty())
      meta["since"] = joined(info.part_since);
  }
  static const char* dtypes[] = {"U64", "F32", "I64", "U32", "U8", "U64"};
  for (auto& t : layout) {
    json shape = t.kind != tensor_entry::floats
                   ? json::array({t.rows})
                   : json::array({t.rows, static_cast<uint64_t>(info.dim)});
    header[t.name] = {{"dtype", dtypes[t.kind]},
                      {"shape", shape},
                      {"data_offsets", {t.begin, t.end}}};
  }
  return header;
}

/// "12,0,7" -> {12, 0, 7}; false for anything but comma-separated plain
/// decimal numbers of at most 18 digits.
bool parse_counts(const std::string& text, std::vector<uint64_t>& out) {
  out.clear();
  if (text.empty())
    return true;
  uint64_t v = 0;
  size_t digits = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ',') {
      if (digits == 0)
        return false;
      out.push_back(v);
      v = 0;
      digits = 0;
    } else if (text[i] >= '0' && text[i] <= '9' && digits < 18) {
      v = v * 10 + static_cast<uint64_t>(text[i] - '0');
      ++digits;
    } else {
      return false;
    }
  }
  return true;
}

} // namespace

namespace {

const std::string safetensors_tail = ".safetensors";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size()
         && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// `checkpoint_path` without its ".safetensors".
std::string stem_of(const std::string& checkpoint_path) {
  auto stem = checkpoint_path;
  if (stem.size() > safetensors_tail.size()
      && ends_with(stem, safetensors_tail))
    stem.resize(stem.size() - safetensors_tail.size());
  return stem;
}

} // namespace

std::string tables_path_of(const std::string& checkpoint_path) {
  return stem_of(checkpoint_path) + ".tables" + safetensors_tail;
}

std::string table_path_of(const std::string& checkpoint_path,
                          const std::string& table) {
  return stem_of(checkpoint_path) + ".table." + table + safetensors_tail;
}

std::vector<std::string> table_file_names(const std::string& tables) {
  std::vector<std::string> out;
  if (tables.empty())
    return out;
  size_t from = 0;
  for (;;) {
    auto comma = tables.find(',', from);
    out.push_back(tables.substr(from, comma - from));
    if (comma == std::string::npos)
      return out;
    from = comma + 1;
  }
}

std::vector<std::string>
table_files_beside(const std::string& checkpoint_path) {
  auto stem = stem_of(checkpoint_path);
  auto slash = stem.rfind('/');
  auto dir = slash == std::string::npos ? std::string{"."}
                                        : stem.substr(0, slash);
  auto prefix = (slash == std::string::npos ? stem : stem.substr(slash + 1))
                + ".table.";
  std::vector<std::string> out;
  struct stat st {};
  auto tables = tables_path_of(checkpoint_path);
  if (::stat(tables.c_str(), &st) == 0)
    out.push_back(tables);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (auto* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name.size() > prefix.size() + safetensors_tail.size()
        && name.compare(0, prefix.size(), prefix) == 0
        && ends_with(name, safetensors_tail))
      out.push_back(slash == std::string::npos ? name : dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// -- writer ------------------------------------------------------------------

class table_file_writer::impl {
public:
  std::string path, tmp;
  table_file_info info;
  std::vector<tensor_entry> layout;
  size_t next = 0; ///< index into layout of the next piece's ids
  int fd = -1;
  bool finished = false;
};

caf::expected<std::unique_ptr<table_file_writer>>
table_file_writer::create(const std::string& path, table_file_info info) {
  if (auto why = check_info(info); !why.empty())
    return make_error(errc::invalid_argument, path + ": " + why);
  auto p = std::make_unique<impl>();
  p->path = path;
  p->tmp = path + ".tmp." + std::to_string(::getpid());
  p->layout = layout_of(info);
  std::string text = header_of(info, p->layout).dump();
  text.append((8 - text.size() % 8) % 8, ' '); // align the data to 8 bytes
  p->info = std::move(info);
  unsigned char len_le[8];
  for (int i = 0; i < 8; ++i)
    len_le[i] = static_cast<unsigned char>(uint64_t{text.size()} >> (8 * i));
  p->fd = ::open(p->tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                 0644);
  if (p->fd < 0)
    return io_error(p->tmp, "cannot create");
  auto w = std::make_unique<table_file_writer>(std::move(p));
  auto& q = *w->impl_;
  if (!write_all(q.fd, len_le, 8) || !write_all(q.fd, text.data(), text.size()))
    return io_error(q.tmp, "write failed");
  return w;
}

table_file_writer::table_file_writer(std::unique_ptr<impl> p)
  : impl_(std::move(p)) {}

table_file_writer::~table_file_writer() {
  if (impl_->fd >= 0)
    ::close(impl_->fd);
  if (!impl_->finished)
    ::unlink(impl_->tmp.c_str());
}

namespace {

/// Appends a piece of one flat tensor of part `part` (an export's
/// tombstones, an admission filter's counters) where the header puts the
/// next one of `kind`: `items` of `item_bytes` each.
caf::error append_flat(table_file_writer::impl& p, size_t part,
                       tensor_entry::kind_t kind, const void* data,
                       uint64_t items, uint64_t item_bytes, const char* unit) {
  auto& head = p.layout[p.next];
  auto in_part = "/p" + std::to_string(part) + "/";
  if (head.kind != kind || items != head.rows
      || head.name.compare(p.info.table.size(), in_part.size(), in_part) != 0)
    return make_error(errc::invalid_argument,
                      p.path + ": the piece given is not " + head.name + " ("
                        + std::to_string(head.rows) + " "
                        + (head.kind == kind ? unit : "rows") + ")");
  if (!write_all(p.fd, data, items * item_bytes))
    return io_error(p.tmp, "write failed");
  ++p.next;
  return caf::none;
}

} // namespace

caf::error
table_file_writer::append_tombstones(size_t part,
                                     const std::vector<uint64_t>& ids) {
  for (size_t at = 0; at < ids.size(); at += table_piece_rows) {
    if (impl_->next >= impl_->layout.size())
      return make_error(errc::invalid_argument,
                        impl_->path + ": a piece beyond the header's");
    auto n = std::min<size_t>(table_piece_rows, ids.size() - at);
    if (auto err = append_flat(*impl_, part, tensor_entry::evicted,
                               ids.data() + at, n, 8, "tombstones"))
      return err;
  }
  return caf::none;
}

caf::error table_file_writer::append(const table_piece& piece) {
  auto& p = *impl_;
  auto per_piece = tensors_per_piece(p.info);
  if (p.next >= p.layout.size())
    return make_error(errc::invalid_argument,
                      p.path + ": a piece beyond the header's");
  auto& head = p.layout[p.next];
  if (head.kind == tensor_entry::evicted || !piece.evicted.empty())
    return append_flat(p, piece.part, tensor_entry::evicted,
                       piece.evicted.data(), piece.evicted.size(), 8,
                       "tombstones");
  if (head.kind == tensor_entry::counts || !piece.counts.empty())
    return append_flat(p, piece.part, tensor_entry::counts, piece.counts.data(),
                       piece.counts.size(), 1, "counters");
  auto expected_part = head.name.substr(p.info.table.size() + 2);
  auto n = head.rows;
  const auto dim = static_cast<uint64_t>(p.info.dim);
  bool fits = piece.ids.size() == n && piece.values.size() == n * dim
              && piece.slots.size() == p.info.slots.size()
              && std::to_string(piece.part)
                   == expected_part.substr(0, expected_part.find('/'));
  for (auto& s : piece.slots)
    fits = fits && s.size() == n * dim;
  if (p.info.ages)
    fits = fits && piece.ages.size() == n && piece.uses.size() == n;
  if (!fits)
    return make_error(errc::invalid_argument,
                      p.path + ": the piece given is not " + head.name + " ("
                        + std::to_string(n) + " rows)");
  bool ok = write_all(p.fd, piece.ids.data(), n * 8)
            && write_all(p.fd, piece.values.data(), n * dim * sizeof(float));
  for (auto& s : piece.slots)
    ok = ok && write_all(p.fd, s.data(), n * dim * sizeof(float));
  if (p.info.ages)
    ok = ok && write_all(p.fd, piece.ages.data(), n * 8)
         && write_all(p.fd, piece.uses.data(), n * 4);
  if (!ok)
    return io_error(p.tmp, "write failed");
  p.next += per_piece;
  return caf::none;
}

caf::error table_file_writer::finish() {
  auto& p = *impl_;
  if (p.next != p.layout.size())
    return make_error(errc::invalid_argument,
                      p.path + ": finished before " + p.layout[p.next].name);
  if (::fsync(p.fd) != 0)
    return io_error(p.tmp, "write failed");
  int fd = p.fd;
  p.fd = -1;
  if (::close(fd) != 0 || ::rename(p.tmp.c_str(), p.path.c_str()) != 0)
    return io_error(p.path, "cannot move the new file into place");
  p.finished = true;
  int dir = ::open(parent_dir(p.path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return caf::none;
}

// -- reader ------------------------------------------------------------------

class table_file_reader::impl {
public:
  std::string path;
  table_file_info info;
  std::vector<tensor_entry> layout;
  size_t next = 0;
  uint64_t data_start = 0;
  int fd = -1;

  bool read_at(void* dst, uint64_t n, uint64_t at) {
    return pread_all(fd, dst, n, at);
  }

  caf::error bad(const std::string& what) const {
    return format_error(path, what);
  }

  /// The ids of tensor `t` (a piece's ids, an export's tombstones) into
  /// `into`, each checked to be below the vocabulary.
  caf::error read_ids(const tensor_entry& t, std::vector<uint64_t>& into) {
    into.resize(t.rows);
    if (!read_at(into.data(), t.rows * 8, data_start + t.begin))
      return io_error(path, "read failed");
    for (auto id : into)
      if (id >= info.vocabulary)
        return bad(t.name + " holds id " + std::to_string(id)
                   + ", not below the vocabulary ("
                   + std::to_string(info.vocabulary) + ")");
    return caf::none;
  }

  /// The metadata of `header` into info; the error says what is wrong.
  caf::error read_metadata(const json& header) {
    if (!header.is_object() || !header.contains("__metadata__")
        || !header["__metadata__"].is_object())
      return bad("not a troupe tables file (no __metadata__)");
    auto& meta = header["__metadata__"];
    auto text = [&](const char* key) -> std::string {
      auto it = meta.find(key);
      return it != meta.end() && it->is_string() ? it->get<std::string>()
                                                 : std::string{};
    };
    if (text("format") != format_name)
      return bad("not a troupe tables file (metadata format is not \""
                 + std::string{format_name} + "\")");
    if (text("version") != format_version
        && text("version") != aged_format_version
        && text("version") != export_format_version)
      return bad("unsupported tables file version \"" + text("version")
                 + "\", this build reads versions 1 to 3");
    const bool three = text("version") == export_format_version;
    if (three != !text("export").empty())
      return bad(three ? "a version 3 file that is not an export"
                       : "an export in a file of version " + text("version"));
    const bool two = text("version") == aged_format_version;
    if (!text("rows").empty() && text("rows") != "ages,uses")
      return bad("metadata rows is not \"ages,uses\": \"" + text("rows")
                 + "\"");
    info.ages = !text("rows").empty();
    if (!two && !three && (info.ages || !text("admission").empty()))
      return bad("ages or admission counts in a version 1 file");
    std::vector<uint64_t> one, pushes;
    info.table = text("table");
    info.optimizer = text("optimizer");
    if (!parse_counts(text("dim"), one) || one.size() != 1
        || one[0] > static_cast<uint64_t>(max_dim))
      return bad("metadata dim is not a width up to " + std::to_string(max_dim)
                 + ": \"" + text("dim") + "\"");
    info.dim = static_cast<int>(one[0]);
    if (!parse_counts(text("vocabulary"), one) || one.size() != 1)
      return bad("metadata vocabulary is not a count: \"" + text("vocabulary")
                 + "\"");
    info.vocabulary = one[0];
    if (!parse_counts(text("parts"), info.part_rows)
        || info.part_rows.size() > max_parts)
      return bad("metadata parts is not a list of row counts: \""
                 + text("parts") + "\"");
    if (!parse_counts(text("pushes"), pushes))
      return bad("metadata pushes is not a list of counts: \"" + text("pushes")
                 + "\"");
    info.part_pushes.assign(pushes.begin(), pushes.end());
    info.counters = 0;
    info.hashes = 0;
    if (!text("admission").empty()) {
      std::vector<uint64_t> filter;
      if (!parse_counts(text("admission"), filter) || filter.size() != 2
          || filter[1] > 16)
        return bad("metadata admission is not \"<counters>,<hashes>\": \""
                   + text("admission") + "\"");
      info.counters = filter[0];
      info.hashes = static_cast<int>(filter[1]);
    }
    info.export_kind = text("export");
    info.sequence = 0;
    info.part_evicted.clear();
    info.part_since.clear();
    if (three) {
      if (!parse_counts(text("sequence"), one) || one.size() != 1)
        return bad("metadata sequence is not a count: \"" + text("sequence")
                   + "\"");
      info.sequence = static_cast<int64_t>(one[0]);
      if (!parse_counts(text("evicted"), info.part_evicted))
        return bad("metadata evicted is not a list of counts: \""
                   + text("evicted") + "\"");
      std::vector<uint64_t> since;
      if (!parse_counts(text("since"), since))
        return bad("metadata since is not a list of counts: \"" + text("since")
                   + "\"");
      info.part_since.assign(since.begin(), since.end());
    }
    info.slots.clear();
    std::stringstream slots{text("slots")};
    for (std::string s; std::getline(slots, s, ',');)
      info.slots.push_back(s);
    if (auto why = check_info(info); !why.empty())
      return bad(why);
    return caf::none;
  }
};

caf::expected<std::unique_ptr<table_file_reader>>
table_file_reader::open(const std::string& path) {
  auto p = std::make_unique<impl>();
  p->path = path;
  p->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (p->fd < 0) {
    if (errno == ENOENT)
      return make_error(errc::file_not_found, path + ": no such file");
    return io_error(path, "cannot open");
  }
  auto r = std::make_unique<table_file_reader>(std::move(p));
  auto& q = *r->impl_;
  struct stat st;
  if (::fstat(q.fd, &st) != 0)
    return io_error(path, "cannot stat");
  if (!S_ISREG(st.st_mode))
    return q.bad("not a regular file");
  auto size = static_cast<uint64_t>(st.st_size);
  unsigned char len_le[8];
  if (size < 8 || !q.read_at(len_le, 8, 0))
    return q.bad("truncated: not even a safetensors header");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= uint64_t{len_le[i]} << (8 * i);
  if (len > size - 8 || len > max_header_bytes)
    return q.bad("a header of " + std::to_string(len) + " bytes in a file of "
                 + std::to_string(size) + " (at most "
                 + std::to_string(max_header_bytes) + ")");
  std::string text(len, '\0');
  if (!q.read_at(text.data(), len, 8))
    return io_error(path, "read failed");
  if (nested_deeper_than(text.data(), text.data() + text.size(), 8))
    return q.bad("corrupt safetensors header: nested too deep");
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    return q.bad(std::string{"corrupt safetensors header: "} + e.what());
  }
  if (auto err = q.read_metadata(header))
    return err;
  // The rows the metadata announces must be in the file before the layout
  // of their pieces is built.
  long double need = 0;
  for (auto n : q.info.part_rows)
    need += static_cast<long double>(n)
              * (8 + (1 + q.info.slots.size()) * 4.0L * q.info.dim
                 + (q.info.ages ? 12 : 0))
            + static_cast<long double>(q.info.counters);
  for (auto n : q.info.part_evicted)
    need += static_cast<long double>(n) * 8;
  if (need > static_cast<long double>(size - 8 - len))
    return q.bad("the metadata announces more rows than the file holds");
  q.layout = layout_of(q.info);
  // Exactly the header a writer of this metadata writes.
  auto expected = header_of(q.info, q.layout);
  if (header.size() != expected.size())
    return q.bad("the header has " + std::to_string(header.size() - 1)
                 + " tensors, the metadata makes "
                 + std::to_string(expected.size() - 1));
  for (auto& [key, value] : expected.items())
    if (key != "__metadata__"
        && (!header.contains(key) || header[key] != value))
      return q.bad("tensor " + key
                   + " is missing or not where its "
                     "metadata puts it");
  q.data_start = 8 + len;
  auto end = q.layout.empty() ? 0 : q.layout.back().end;
  if (q.data_start + end != size)
    return q.bad("the tensors end at byte " + std::to_string(q.data_start + end)
                 + " of " + std::to_string(size));
  return r;
}

table_file_reader::table_file_reader(std::unique_ptr<impl> p)
  : impl_(std::move(p)) {}

table_file_reader::~table_file_reader() {
  if (impl_->fd >= 0)
    ::close(impl_->fd);
}

const table_file_info& table_file_reader::info() const {
  return impl_->info;
}

caf::expected<bool> table_file_reader::next(table_piece& out) {
  auto& q = *impl_;
  if (q.next >= q.layout.size())
    return false;
  auto& head = q.layout[q.next];
  auto n = head.rows;
  const auto dim = static_cast<uint64_t>(q.info.dim);
  auto part = head.name.substr(q.info.table.size() + 2);
  out.part = std::stoul(part.substr(0, part.find('/')));
  out.counts.clear();
  out.evicted.clear();
  if (head.kind == tensor_entry::evicted || head.kind == tensor_entry::counts) {
    // A piece of one flat tensor holds no rows.
    out.ids.clear();
    out.values.clear();
    out.slots.assign(q.info.slots.size(), {});
    out.ages.clear();
    out.uses.clear();
    if (head.kind == tensor_entry::evicted) {
      if (auto err = q.read_ids(head, out.evicted))
        return err;
    } else {
      auto c = part.substr(part.find('/') + 2);
      out.counts_first = std::stoull(c.substr(0, c.find('/')))
                         * table_count_piece;
      out.counts.resize(n);
      if (!q.read_at(out.counts.data(), n, q.data_start + head.begin))
        return io_error(q.path, "read failed");
    }
    ++q.next;
    return true;
  }
  out.values.resize(n * dim);
  out.slots.resize(q.info.slots.size());
  if (auto err = q.read_ids(head, out.ids))
    return err;
  for (size_t s = 0; s <= q.info.slots.size(); ++s) {
    auto& t = q.layout[q.next + 1 + s];
    auto& into = s == 0 ? out.values : out.slots[s - 1];
    into.resize(n * dim);
    if (!q.read_at(into.data(), n * dim * sizeof(float),
                   q.data_start + t.begin))
      return io_error(q.path, "read failed");
    for (auto x : into)
      if (!std::isfinite(x))
        return q.bad(t.name + " holds a value that is not finite");
  }
  out.ages.clear();
  out.uses.clear();
  if (q.info.ages) {
    auto& ages = q.layout[q.next + 2 + q.info.slots.size()];
    auto& uses = q.layout[q.next + 3 + q.info.slots.size()];
    out.ages.resize(n);
    out.uses.resize(n);
    if (!q.read_at(out.ages.data(), n * 8, q.data_start + ages.begin)
        || !q.read_at(out.uses.data(), n * 4, q.data_start + uses.begin))
      return io_error(q.path, "read failed");
    for (auto a : out.ages)
      if (a < 0)
        return q.bad(ages.name + " holds a negative age");
  }
  q.next += tensors_per_piece(q.info);
  return true;
}

} // namespace troupe
