#include "runtime/sparse/table_export.hpp"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_io.hpp"
#include "runtime/base/json_text.hpp"
#include "runtime/sparse/id_index.hpp"
#include "runtime/sparse/sparse_table.hpp"
#include "runtime/sparse/table_file.hpp"

namespace troupe {

using json = nlohmann::json;
using namespace file_io;

namespace {

constexpr const char* manifest_format = "troupe-exports";
/// A manifest larger than this is not one troupe wrote (an entry is about
/// 300 bytes: 50,000 exports).
constexpr std::streamsize max_manifest_bytes = 16 << 20;

/// A plain file name: what a manifest may name (nothing outside its
/// folder).
bool plain_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "."
         && name != "..";
}

/// The rows a chain has applied so far: ids and values in slots, an index
/// from id to slot; a removed row's slot is filled by the last one.
class applied_rows {
public:
  explicit applied_rows(size_t dim) : dim_(dim) {}

  void clear() {
    index_ = id_index{};
    ids_.clear();
    values_.clear();
  }

  void put(uint64_t id, const float* values) {
    bool inserted = false;
    auto slot = index_.find_or_insert(id, static_cast<uint32_t>(ids_.size()),
                                      inserted);
    if (inserted) {
      ids_.push_back(id);
      values_.insert(values_.end(), values, values + dim_);
    } else {
      std::memcpy(values_.data() + slot * dim_, values, dim_ * sizeof(float));
    }
  }

  void remove(uint64_t id) {
    auto slot = index_.find(id);
    if (slot == id_index::absent)
      return;
    index_.erase(id);
    const size_t last = ids_.size() - 1;
    if (slot != last) {
      std::memcpy(values_.data() + slot * dim_, values_.data() + last * dim_,
                  dim_ * sizeof(float));
      ids_[slot] = ids_[last];
      index_.set_slot(ids_[slot], slot);
    }
    ids_.pop_back();
    values_.resize(ids_.size() * dim_);
  }

  /// The rows by ascending id into `out`.
  void sorted_into(exported_table& out) const {
    std::vector<uint32_t> order(ids_.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return ids_[a] < ids_[b]; });
    out.ids.resize(order.size());
    out.values.resize(order.size() * dim_);
    for (size_t i = 0; i < order.size(); ++i) {
      out.ids[i] = ids_[order[i]];
      std::memcpy(out.values.data() + i * dim_,
                  values_.data() + order[i] * dim_, dim_ * sizeof(float));
    }
  }

private:
  size_t dim_;
  id_index index_;
  std::vector<uint64_t> ids_;
  std::vector<float> values_;
};

} // namespace

std::string export_manifest_path(const std::string& dir) {
  return dir + "/manifest.json";
}

std::string export_dense_name(int64_t sequence) {
  return "export-" + std::to_string(sequence) + ".safetensors";
}

std::string export_table_name(int64_t sequence, const std::string& table) {
  return "export-" + std::to_string(sequence) + ".table." + table
         + ".safetensors";
}

caf::expected<export_manifest> read_export_manifest(const std::string& dir) {
  auto path = export_manifest_path(dir);
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_error(errc::file_not_found, path + ": no such file");
  std::string text(static_cast<size_t>(max_manifest_bytes) + 1, '\0');
  in.read(text.data(), max_manifest_bytes + 1);
  if (in.gcount() > max_manifest_bytes)
    return format_error(
      path, "larger than " + std::to_string(max_manifest_bytes) + " bytes");
  text.resize(static_cast<size_t>(in.gcount()));
  if (nested_deeper_than(text.data(), text.data() + text.size(), 8))
    return format_error(path, "nested too deep");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return format_error(path, std::string{"not JSON: "} + e.what());
  }
  if (!doc.is_object() || doc.value("format", json{}) != manifest_format
      || doc.value("version", json{}) != 1 || !doc.contains("exports")
      || !doc["exports"].is_array())
    return format_error(path, "not a troupe exports manifest (format \""
                                + std::string{manifest_format}
                                + "\", version 1, an \"exports\" list)");
  export_manifest m;
  int64_t before = -1;
  for (size_t i = 0; i < doc["exports"].size(); ++i) {
    auto& e = doc["exports"][i];
    auto where = "exports[" + std::to_string(i) + "]";
    try {
      export_entry x;
      x.sequence = e.at("sequence").get<int64_t>();
      x.kind = e.at("kind").get<std::string>();
      x.step = e.at("step").get<int64_t>();
      x.time = e.at("time").get<double>();
      x.dense = e.value("dense", std::string{});
      x.tables = e.at("tables").get<std::map<std::string, std::string>>();
      x.rows = e.value("rows", uint64_t{0});
      x.evicted = e.value("evicted", uint64_t{0});
      x.bytes = e.value("bytes", uint64_t{0});
      if (x.kind != "full" && x.kind != "delta")
        return format_error(path, where + ": kind \"" + x.kind
                                    + "\" is not \"full\" or \"delta\"");
      if (x.sequence <= before)
        return format_error(path,
                            where + ": sequence " + std::to_string(x.sequence)
                              + " does not follow " + std::to_string(before));
      if (!x.dense.empty() && !plain_name(x.dense))
        return format_error(path, where + ": \"" + x.dense
                                    + "\" is not a file in the folder");
      for (auto& [name, file] : x.tables)
        if (!plain_name(file))
          return format_error(path, where + ": table " + name + "'s \"" + file
                                      + "\" is not a file in the folder");
      before = x.sequence;
      m.exports.push_back(std::move(x));
    } catch (const json::exception& err) {
      return format_error(path, where + ": " + err.what());
    }
  }
  return m;
}

caf::error write_export_manifest(const std::string& dir,
                                 const export_manifest& m) {
  json list = json::array();
  for (auto& x : m.exports)
    list.push_back({{"sequence", x.sequence},
                    {"kind", x.kind},
                    {"step", x.step},
                    {"time", x.time},
                    {"dense", x.dense},
                    {"tables", x.tables},
                    {"rows", x.rows},
                    {"evicted", x.evicted},
                    {"bytes", x.bytes}});
  json doc = {{"format", manifest_format}, {"version", 1}, {"exports", list}};
  auto text = doc.dump(1) + "\n";
  auto path = export_manifest_path(dir);
  auto tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error(tmp, "cannot create");
  bool ok = write_all(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return io_error(path, "cannot write");
  }
  int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return caf::none;
}

caf::expected<export_entry>
write_table_export(const std::string& dir,
                   const std::vector<sparse_table*>& parts, int64_t sequence,
                   const std::vector<int64_t>& since) {
  const bool full = since.empty();
  if (parts.empty() || (!full && since.size() != parts.size()))
    return make_error(errc::invalid_argument,
                      "an export of " + std::to_string(parts.size())
                        + " parts after " + std::to_string(since.size())
                        + " push counts");
  auto& first = *parts.front();
  table_file_info info;
  info.table = first.table().name;
  info.dim = first.dim();
  info.vocabulary = first.table().vocabulary;
  info.optimizer = to_string(first.optimizer().type);
  info.export_kind = full ? "full" : "delta";
  info.sequence = sequence;
  std::vector<std::vector<uint32_t>> slots;
  std::vector<std::vector<uint64_t>> gone;
  for (size_t p = 0; p < parts.size(); ++p) {
    auto& t = *parts[p];
    slots.push_back(t.changed_slots(full ? -1 : since[p]));
    gone.push_back(full ? std::vector<uint64_t>{} : t.evicted_since(since[p]));
    info.part_rows.push_back(slots.back().size());
    info.part_pushes.push_back(t.pushes());
    info.part_evicted.push_back(gone.back().size());
    if (!full)
      info.part_since.push_back(since[p]);
  }
  export_entry e;
  e.sequence = sequence;
  e.kind = info.export_kind;
  auto name = export_table_name(sequence, info.table);
  auto path = dir + "/" + name;
  auto w = table_file_writer::create(path, info);
  if (!w)
    return w.error();
  const auto dim = static_cast<size_t>(info.dim);
  table_piece piece;
  for (size_t p = 0; p < parts.size(); ++p) {
    piece.part = p;
    auto& s = slots[p];
    for (size_t at = 0; at < s.size(); at += table_piece_rows) {
      auto n = std::min<size_t>(table_piece_rows, s.size() - at);
      piece.ids.resize(n);
      piece.values.resize(n * dim);
      parts[p]->copy_slots(s.data() + at, n, piece.ids.data(),
                           piece.values.data());
      if (auto err = (*w)->append(piece))
        return err;
    }
    if (auto err = (*w)->append_tombstones(p, gone[p]))
      return err;
    e.rows += s.size();
    e.evicted += gone[p].size();
  }
  if (auto err = (*w)->finish())
    return err;
  if (!full)
    for (size_t p = 0; p < parts.size(); ++p)
      parts[p]->forget_evicted(since[p]);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    e.bytes = static_cast<uint64_t>(st.st_size);
  e.tables[info.table] = name;
  return e;
}

caf::expected<exported_table> read_exported_table(const std::string& dir,
                                                  const std::string& table,
                                                  int64_t upto) {
  auto m = read_export_manifest(dir);
  if (!m)
    return m.error();
  auto& list = m->exports;
  auto manifest = export_manifest_path(dir);
  // The last export to apply, and the newest full one at or before it.
  size_t last = list.size();
  for (size_t i = 0; i < list.size(); ++i)
    if (upto < 0 || list[i].sequence <= upto)
      last = i;
  if (last == list.size() || (upto >= 0 && list[last].sequence != upto))
    return make_error(errc::file_not_found,
                      manifest + ": no export "
                        + (upto < 0 ? std::string{"at all"}
                                    : std::to_string(upto)));
  size_t first = last;
  while (list[first].kind != "full") {
    if (first == 0)
      return format_error(manifest, "export "
                                      + std::to_string(list[last].sequence)
                                      + " follows no full export");
    --first;
  }
  exported_table out;
  out.table = table;
  std::unique_ptr<applied_rows> rows;
  std::vector<int64_t> pushes; ///< each part's, at the file before
  std::string before;          ///< that file
  for (size_t i = first; i <= last; ++i) {
    auto it = list[i].tables.find(table);
    if (it == list[i].tables.end())
      return make_error(errc::file_not_found,
                        manifest + ": export "
                          + std::to_string(list[i].sequence)
                          + " holds no table \"" + table + "\"");
    auto path = dir + "/" + it->second;
    auto r = table_file_reader::open(path);
    if (!r)
      return r.error();
    auto& info = (*r)->info();
    if (info.export_kind != list[i].kind || info.table != table
        || info.sequence != list[i].sequence)
      return format_error(
        path, "holds " + info.export_kind + " export "
                + std::to_string(info.sequence) + " of table \"" + info.table
                + "\", the manifest says " + list[i].kind + " export "
                + std::to_string(list[i].sequence) + " of \"" + table + "\"");
    if (!rows) {
      out.dim = info.dim;
      out.vocabulary = info.vocabulary;
      rows = std::make_unique<applied_rows>(static_cast<size_t>(info.dim));
    } else if (info.dim != out.dim) {
      return format_error(path, "rows of dim " + std::to_string(info.dim)
                                  + " after " + before + "'s "
                                  + std::to_string(out.dim));
    }
    if (info.export_kind == "delta"
        && std::vector<int64_t>(info.part_since) != pushes)
      return format_error(path, "a delta that does not follow " + before
                                  + " (the push counts it follows are not "
                                    "that file's: an export is missing or "
                                    "repeated)");
    table_piece piece;
    for (;;) {
      auto more = (*r)->next(piece);
      if (!more)
        return more.error();
      if (!*more)
        break;
      for (auto id : piece.evicted)
        rows->remove(id);
      const auto dim = static_cast<size_t>(info.dim);
      for (size_t k = 0; k < piece.ids.size(); ++k)
        rows->put(piece.ids[k], piece.values.data() + k * dim);
    }
    pushes = info.part_pushes;
    before = path;
    out.sequence = info.sequence;
  }
  rows->sorted_into(out);
  return out;
}

} // namespace troupe
