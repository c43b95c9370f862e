#include "runtime/checkpoint/declared_params.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_io.hpp"
#include "runtime/base/json_text.hpp"
#include "runtime/checkpoint/safetensors_file.hpp"

namespace troupe {

namespace {

using json = nlohmann::json;
using namespace file_io;

/// A model's state_dict has hundreds of tensors at most; bounded because
/// building the layout compares each name with those before it.
constexpr size_t max_declared_tensors = 16384;

/// The dtypes a user's file may hold, with what to do about them.
std::string dtype_advice(const std::string& dtype) {
  if (dtype == "F64" || dtype == "F16" || dtype == "BF16")
    return "convert it to float32 before writing the file (tensor.float()), "
           "or declare it a buffer if no optimizer trains it";
  return "a tensor that no optimizer trains, such as BatchNorm's "
         "num_batches_tracked, is a buffer: write the file with "
         "write_parameters(path, model) (the module's buffers are known "
         "then) or name it in buffers=[...]";
}

/// Reads element `i` of an array of T as a double.
template <class T>
double read_element(const char* data, size_t i) {
  T v;
  std::memcpy(&v, data + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}

/// A dtype a buffer may have (a parameter is F32): its bytes an element,
/// and how to read one.
struct buffer_dtype {
  const char* name;
  size_t bytes;
  double (*read)(const char* data, size_t i);
};

constexpr buffer_dtype buffer_dtypes[] = {
  {"F64", 8, read_element<double>},  {"F32", 4, read_element<float>},
  {"I64", 8, read_element<int64_t>}, {"I32", 4, read_element<int32_t>},
  {"I16", 2, read_element<int16_t>}, {"I8", 1, read_element<int8_t>},
  {"U8", 1, read_element<uint8_t>},  {"BOOL", 1, read_element<uint8_t>}};

/// `dtype`'s entry, or null for a dtype a buffer cannot have.
const buffer_dtype* find_buffer_dtype(const std::string& dtype) {
  for (auto& d : buffer_dtypes)
    if (dtype == d.name)
      return &d;
  return nullptr;
}

/// A float holds every integer up to 2^24 exactly.
constexpr double exact_integers = 16777216.0;

/// The buffers the file's metadata names (buffers_key: a JSON object of
/// names and dtypes, as a string, since safetensors' metadata values are
/// strings), checked to be strings.
caf::expected<std::map<std::string, std::string>>
declared_buffers(const std::string& path, const nlohmann::json& header) {
  std::map<std::string, std::string> out;
  auto meta = header.find("__metadata__");
  if (meta == header.end() || !meta->is_object())
    return out;
  auto it = meta->find(buffers_key);
  if (it == meta->end())
    return out;
  nlohmann::json names;
  // Parsed only when as flat as such a list is: the parser recurses.
  if (it->is_string()) {
    const auto& text = it->get_ref<const std::string&>();
    if (!nested_deeper_than(text.data(), text.data() + text.size(), 2))
      names = nlohmann::json::parse(text, nullptr, false);
  }
  if (!names.is_object())
    return format_error(path, std::string{"__metadata__/"} + buffers_key
                                + " is not a JSON object of buffer names "
                                  "and dtypes in a string");
  for (auto& [name, dtype] : names.items()) {
    if (!dtype.is_string())
      return format_error(path, "buffer " + name
                                  + " has a dtype that is "
                                    "not a string in __metadata__/"
                                  + buffers_key);
    out[name] = dtype.get<std::string>();
  }
  return out;
}

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

struct entry {
  std::string name;
  shape dims;
  uint64_t begin = 0, end = 0;
  std::string dtype;       ///< as the file holds it
  std::string model_dtype; ///< a buffer's in the model (the metadata's)
  bool buffer = false;
};

} // namespace

caf::expected<declared_params> read_declared_params(const std::string& path) {
  auto file = read_safetensors_file(path, true);
  if (!file)
    return file.error();
  auto& header = file->header;
  const uint64_t data_size = file->data_size();
  if (!header.is_object())
    return format_error(path, "not a safetensors file (its header is not a "
                              "JSON object)");
  std::vector<entry> entries;
  try {
    auto buffers = declared_buffers(path, header);
    if (!buffers)
      return buffers.error();
    for (auto& [name, dtype] : *buffers) {
      if (!header.contains(name) || name == "__metadata__")
        return format_error(path, "__metadata__/" + std::string{buffers_key}
                                    + " names buffer " + name
                                    + ", which is no tensor of the file");
      if (find_buffer_dtype(dtype) == nullptr)
        return format_error(path, "buffer " + name + " has dtype " + dtype
                                    + " in __metadata__/" + buffers_key
                                    + "; a buffer is a float (F64, F32) or "
                                      "an integer (I64, I32, I16, I8, U8, "
                                      "BOOL)");
    }
    for (auto& [key, value] : header.items()) {
      if (key == "__metadata__")
        continue;
      if (entries.size() == max_declared_tensors)
        return format_error(path, "more than "
                                    + std::to_string(max_declared_tensors)
                                    + " tensors");
      if (key.empty() || has_control(key))
        return format_error(path, "a tensor name that is empty or holds "
                                  "control characters");
      if (!value.is_object() || !value.contains("dtype")
          || !value.contains("shape") || !value.contains("data_offsets"))
        return format_error(path, "tensor " + key
                                    + " is not an object with "
                                      "dtype, shape and data_offsets");
      auto& dtype_json = value.at("dtype");
      if (!dtype_json.is_string())
        return format_error(path, "tensor " + key
                                    + " has a dtype that is "
                                      "not a string");
      auto dtype = dtype_json.get<std::string>();
      bool buffer = buffers->count(key) > 0;
      const buffer_dtype* stored = buffer ? find_buffer_dtype(dtype) : nullptr;
      if (buffer && stored == nullptr)
        return format_error(path, "buffer " + key + " has dtype " + dtype
                                    + "; a buffer is a float (F64, F32) or "
                                      "an integer (I64, I32, I16, I8, U8, "
                                      "BOOL)");
      if (!buffer && dtype != "F32")
        return format_error(path, "tensor " + key + " has dtype " + dtype
                                    + "; the shards train float32 (F32) "
                                      "tensors: "
                                    + dtype_advice(dtype));
      auto extent = read_f32_extent(path, key, value, data_size,
                                    buffer ? stored->bytes : sizeof(float));
      if (!extent)
        return extent.error();
      entry e{key,           std::move(extent->dims),
              extent->begin, extent->end,
              dtype,         buffer ? buffers->at(key) : dtype,
              buffer};
      entries.push_back(std::move(e));
    }
  } catch (const json::exception& e) {
    return format_error(path,
                        std::string{"corrupt safetensors header: "} + e.what());
  }
  if (entries.empty())
    return format_error(path, "holds no tensors");
  // The file's own order, which is its data's.
  std::sort(entries.begin(), entries.end(),
            [](const entry& a, const entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      return format_error(path, "tensors " + entries[i - 1].name + " and "
                                  + entries[i].name + " overlap");
  declared_params out;
  for (auto& e : entries)
    if (e.buffer)
      out.layout.add_buffer(e.name, e.dims, e.model_dtype);
    else
      out.layout.add(e.name, e.dims);
  out.values.resize(out.layout.total());
  const char* data = file->data();
  for (size_t i = 0; i < entries.size(); ++i) {
    auto& t = out.layout.tensors()[i];
    auto* dst = out.values.data() + t.offset;
    auto* src = data + entries[i].begin;
    // Checked above: a parameter is F32, a buffer of a dtype listed.
    const auto* stored = find_buffer_dtype(entries[i].dtype);
    bool integer = t.dtype[0] != 'F' || stored->name[0] != 'F';
    for (size_t j = 0; j < t.size; ++j) {
      double v = stored->read(src, j);
      dst[j] = static_cast<float>(v);
      if (!std::isfinite(dst[j]))
        return format_error(path, "tensor " + t.name
                                    + " holds a NaN or "
                                      "infinite value (element "
                                    + std::to_string(j) + ")");
      if (integer && std::fabs(v) > exact_integers)
        return format_error(path, "buffer " + t.name + " holds "
                                    + std::to_string(static_cast<int64_t>(v))
                                    + " (element " + std::to_string(j)
                                    + "); the shards hold buffers as floats, "
                                      "exact for integers up to 2^24");
    }
  }
  return out;
}

caf::error write_declared_params(const std::string& path,
                                 const declared_params& params) {
  if (params.values.size() != params.layout.total())
    return make_error(errc::wrong_size,
                      path + ": " + std::to_string(params.values.size())
                        + " values, the layout needs "
                        + std::to_string(params.layout.total()));
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json buffers = nlohmann::json::object();
  for (auto& t : params.layout.tensors()) {
    auto begin = t.offset * sizeof(float);
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.dims},
                      {"data_offsets",
                       {begin, begin + t.size * sizeof(float)}}};
    if (t.buffer)
      buffers[t.name] = t.dtype;
  }
  // A buffer is written as float32 here; its dtype is kept in the list.
  if (!buffers.empty())
    header["__metadata__"] = {{buffers_key, buffers.dump()}};
  return write_safetensors_file(path, header, {&params.values});
}

std::string values_digest(const std::vector<float>& values) {
  uint64_t h = 14695981039346656037ull;
  auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i)
    h = (h ^ bytes[i]) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string describe_declared(const param_layout& layout) {
  return "external (" + std::to_string(layout.tensors().size()) + " tensors, "
         + std::to_string(layout.total()) + " floats)";
}

} // namespace troupe
