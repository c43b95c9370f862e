#include "runtime/checkpoint/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_io.hpp"
#include "runtime/base/json_text.hpp"
#include "runtime/checkpoint/safetensors_file.hpp"

namespace troupe {

namespace {

constexpr const char* format_name = "troupe-checkpoint";
constexpr const char* format_version = "1";
/// Tensors of a file, params and optimizer slots together: troupe's models
/// have at most about 130 (64 hidden layers), 400 with Adam's two slots.
/// Bounded because building the layout compares each name with those
/// before it: 20,000 tensors took 0.4 s to read, the 200,000 that fit in
/// a 16 MB header would take about 40 s.
constexpr size_t max_tensors = 4096;

using json = nlohmann::json;
using namespace file_io;

} // namespace

caf::error write_checkpoint(const std::string& path, const checkpoint& ckpt) {
  const size_t total = ckpt.layout.total();
  if (ckpt.params.size() != total)
    return make_error(errc::wrong_size, path + ": params have "
                                          + std::to_string(ckpt.params.size())
                                          + " values, layout needs "
                                          + std::to_string(total));
  for (auto& [name, values] : ckpt.slots)
    if (values.size() != total)
      return make_error(errc::wrong_size,
                        path + ": optimizer slot " + name + " has "
                          + std::to_string(values.size()) + " values, needs "
                          + std::to_string(total));
  // What is written must read back (read_checkpoint's bound).
  const size_t tensors = ckpt.layout.tensors().size() * (1 + ckpt.slots.size());
  if (tensors > max_tensors)
    return make_error(errc::invalid_argument,
                      path + ": " + std::to_string(tensors)
                        + " tensors (a checkpoint holds at most "
                        + std::to_string(max_tensors) + ")");
  // Header: one entry per tensor per vector, offsets in bytes from the start
  // of the data section.
  json header = json::object();
  json meta = json::object();
  for (auto& [key, value] : ckpt.metadata) {
    // The file's own keys: a caller's value there would be overwritten on
    // write and dropped on read, silently.
    if (key == "format" || key == "version" || key == "step")
      return make_error(errc::invalid_argument,
                        path + ": metadata key \"" + key
                          + "\" is reserved for the checkpoint format");
    meta[key] = value;
  }
  // Which tensors are buffers, and their dtypes: what a reader hands a
  // user's model back in (the values are float32 as every other's).
  // A caller's own list (one read from a file) is written as it came.
  json buffers = json::object();
  for (auto& t : ckpt.layout.tensors())
    if (t.buffer)
      buffers[t.name] = t.dtype;
  if (!buffers.empty() && !meta.contains(buffers_key))
    meta[buffers_key] = buffers.dump();
  meta["format"] = format_name;
  meta["version"] = format_version;
  meta["step"] = std::to_string(ckpt.step);
  header["__metadata__"] = meta;
  std::vector<std::pair<std::string, const std::vector<float>*>> vectors;
  vectors.emplace_back("params", &ckpt.params);
  for (auto& [name, values] : ckpt.slots)
    vectors.emplace_back(name, &values);
  size_t offset = 0;
  for (auto& [prefix, values] : vectors)
    for (auto& t : ckpt.layout.tensors()) {
      size_t bytes = t.size * sizeof(float);
      header[prefix + "/" + t.name] = {{"dtype", "F32"},
                                       {"shape", t.dims},
                                       {"data_offsets",
                                        {offset, offset + bytes}}};
      offset += bytes;
    }
  std::vector<const std::vector<float>*> data;
  for (auto& [prefix, values] : vectors)
    data.push_back(values);
  return write_safetensors_file(path, header, data);
}

namespace {

/// "123" -> 123; anything else (a sign, a point, an exponent, trailing
/// characters, more than 18 digits) -> -1.
int64_t strict_count(const std::string& text) {
  if (text.empty() || text.size() > 18)
    return -1;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// The metadata of `header` into `out` (step and the writer's keys).
caf::error read_metadata(const json& header, const std::string& path,
                         checkpoint& out) {
  if (!header.is_object() || !header.contains("__metadata__"))
    return format_error(path, "not a troupe checkpoint (no __metadata__)");
  auto& meta = header.at("__metadata__");
  if (!meta.is_object())
    return format_error(path, "not a troupe checkpoint (__metadata__ is not "
                              "an object)");
  for (auto& [key, value] : meta.items())
    if (!value.is_string())
      return format_error(path, "metadata " + key + " is not a string");
  if (meta.value("format", "") != format_name)
    return format_error(path, "not a troupe checkpoint (metadata format is "
                              "not \"troupe-checkpoint\")");
  if (meta.value("version", "") != format_version)
    return format_error(path, "unsupported checkpoint version \""
                                + meta.value("version", "")
                                + "\", this "
                                  "build reads version 1");
  for (auto& [key, value] : meta.items())
    if (key != "format" && key != "version" && key != "step")
      out.metadata[key] = value.get<std::string>();
  auto step = meta.value("step", "");
  out.step = strict_count(step);
  if (out.step < 0)
    return format_error(path, "metadata step is not a non-negative integer: \""
                                + step + "\"");
  return caf::none;
}

} // namespace

caf::expected<checkpoint> read_checkpoint_metadata(const std::string& path) {
  auto file = read_safetensors_file(path, false);
  if (!file)
    return file.error();
  checkpoint out;
  if (auto err = read_metadata(file->header, path, out))
    return err;
  return out;
}

caf::expected<checkpoint> read_checkpoint(const std::string& path) {
  auto file = read_safetensors_file(path, true);
  if (!file)
    return file.error();
  auto& header = file->header;
  const uint64_t data_size = file->file_size - 8 - file->header_len;
  const char* data = file->bytes.data() + 8 + file->header_len;
  checkpoint out;
  if (auto err = read_metadata(header, path, out))
    return err;
  if (header.size() > max_tensors + 1) // + __metadata__
    return format_error(path, std::to_string(header.size() - 1)
                                + " tensors (at most "
                                + std::to_string(max_tensors) + ")");
  try {
    // Collect tensors, ordered by data offset (JSON objects are unordered).
    struct entry {
      std::string prefix, name;
      shape dims;
      uint64_t begin, end;
    };
    std::vector<entry> entries;
    for (auto& [key, value] : header.items()) {
      if (key == "__metadata__")
        continue;
      auto slash = key.find('/');
      if (slash == std::string::npos)
        return format_error(path, "tensor \"" + key
                                    + "\" is not named <vector>/<tensor>");
      if (!value.is_object())
        return format_error(path, "tensor " + key + " is not an object");
      auto dtype = value.at("dtype");
      if (!dtype.is_string() || dtype.get<std::string>() != "F32")
        return format_error(path, "tensor " + key + " has dtype " + dtype.dump()
                                    + ", expected F32");
      auto extent = read_f32_extent(path, key, value, data_size);
      if (!extent)
        return extent.error();
      entry e{key.substr(0, slash), key.substr(slash + 1),
              std::move(extent->dims), extent->begin, extent->end};
      entries.push_back(std::move(e));
    }
    std::sort(entries.begin(), entries.end(),
              [](const entry& a, const entry& b) { return a.begin < b.begin; });
    // Tensors never share bytes: a slot that aliased the parameters would
    // be read as the parameters.
    for (size_t i = 1; i < entries.size(); ++i)
      if (entries[i].begin < entries[i - 1].end)
        return format_error(path, "tensors " + entries[i - 1].prefix + "/"
                                    + entries[i - 1].name + " and "
                                    + entries[i].prefix + "/" + entries[i].name
                                    + " overlap");
    std::map<std::string, const entry*> by_key;
    for (auto& e : entries)
      by_key[e.prefix + "/" + e.name] = &e;
    json buffers = json::object();
    if (auto it = out.metadata.find(buffers_key); it != out.metadata.end()) {
      // Parsed only when as flat as such a list is: the parser recurses.
      auto& text = it->second;
      if (!nested_deeper_than(text.data(), text.data() + text.size(), 2))
        buffers = json::parse(text, nullptr, false);
      else
        buffers = json{};
      if (!buffers.is_object())
        return format_error(path, std::string{"metadata "} + buffers_key
                                    + " is not a JSON object of buffer "
                                      "names and dtypes");
      for (auto& [name, dtype] : buffers.items())
        if (!dtype.is_string() || by_key.count("params/" + name) == 0)
          return format_error(path, std::string{"metadata "} + buffers_key
                                      + " names " + name
                                      + ", which is no params/ tensor "
                                        "with a dtype");
    }
    for (auto& e : entries)
      if (e.prefix == "params") {
        auto b = buffers.find(e.name);
        if (b != buffers.end())
          out.layout.add_buffer(e.name, e.dims, b->get<std::string>());
        else
          out.layout.add(e.name, e.dims);
      }
    if (out.layout.tensors().empty())
      return format_error(path, "holds no params/ tensors");
    const size_t total = out.layout.total();
    auto fill = [&](const std::string& prefix,
                    std::vector<float>& dst) -> caf::error {
      dst.resize(total);
      for (auto& t : out.layout.tensors()) {
        auto it = by_key.find(prefix + "/" + t.name);
        if (it == by_key.end() || it->second->dims != t.dims)
          return format_error(path, prefix + "/" + t.name
                                      + " is missing or has the wrong shape");
        std::memcpy(dst.data() + t.offset, data + it->second->begin,
                    t.size * sizeof(float));
      }
      for (size_t i = 0; i < dst.size(); ++i)
        if (!std::isfinite(dst[i]))
          return format_error(path, prefix
                                      + " holds a NaN or infinite "
                                        "value (element "
                                      + std::to_string(i) + ")");
      return caf::none;
    };
    if (auto err = fill("params", out.params))
      return err;
    std::vector<std::string> prefixes; // in the order of their data
    std::set<std::string> seen;
    for (auto& e : entries)
      if (e.prefix != "params" && seen.insert(e.prefix).second)
        prefixes.push_back(e.prefix);
    for (auto& prefix : prefixes) {
      out.slots.emplace_back(prefix, std::vector<float>{});
      if (auto err = fill(prefix, out.slots.back().second))
        return err;
    }
    // No tensor the layout does not name.
    size_t named = out.layout.tensors().size() * (1 + prefixes.size());
    if (entries.size() != named)
      return format_error(path, std::to_string(entries.size() - named)
                                  + " tensors fit no parameter of the "
                                    "checkpoint's layout");
  } catch (const json::exception& e) {
    return format_error(path,
                        std::string{"corrupt safetensors header: "} + e.what());
  } catch (const std::invalid_argument& e) {
    return format_error(path, e.what());
  }
  return out;
}

caf::error check_layout(const checkpoint& ckpt, const param_layout& expected,
                        const std::string& path) {
  if (auto err = expected.compare(ckpt.layout))
    return make_error(errc::layout_mismatch,
                      path + ": checkpoint does not fit this model: "
                        + describe(err));
  return caf::none;
}

} // namespace troupe
