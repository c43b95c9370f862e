#include "runtime/checkpoint/declared_params.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_io.hpp"
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
    return "convert it to float32 before writing the file (tensor.float())";
  return "troupe trains floating-point parameters only: leave it out of the "
         "file (a buffer such as num_batches_tracked is the model's own)";
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
        return format_error(path, "tensor " + key + " is not an object with "
                                  "dtype, shape and data_offsets");
      auto& dtype = value.at("dtype");
      if (!dtype.is_string())
        return format_error(path, "tensor " + key + " has a dtype that is "
                                  "not a string");
      if (dtype.get<std::string>() != "F32")
        return format_error(path, "tensor " + key + " has dtype "
                                    + dtype.get<std::string>()
                                    + "; the shards hold float32 (F32) "
                                      "tensors: "
                                    + dtype_advice(dtype.get<std::string>()));
      auto extent = read_f32_extent(path, key, value, data_size);
      if (!extent)
        return extent.error();
      entry e{key, std::move(extent->dims), extent->begin, extent->end};
      entries.push_back(std::move(e));
    }
  } catch (const json::exception& e) {
    return format_error(path, std::string{"corrupt safetensors header: "}
                                + e.what());
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
    out.layout.add(e.name, e.dims);
  out.values.resize(out.layout.total());
  const char* data = file->data();
  for (size_t i = 0; i < entries.size(); ++i) {
    auto& t = out.layout.tensors()[i];
    auto* dst = out.values.data() + t.offset;
    std::memcpy(dst, data + entries[i].begin, t.size * sizeof(float));
    for (size_t j = 0; j < t.size; ++j)
      if (!std::isfinite(dst[j]))
        return format_error(path, "tensor " + t.name + " holds a NaN or "
                                  "infinite value (element "
                                    + std::to_string(j) + ")");
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
  for (auto& t : params.layout.tensors()) {
    auto begin = t.offset * sizeof(float);
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.dims},
                      {"data_offsets",
                       {begin, begin + t.size * sizeof(float)}}};
  }
  return write_safetensors_file(path, header, {&params.values});
}

std::string describe_declared(const param_layout& layout) {
  return "external (" + std::to_string(layout.tensors().size())
         + " tensors, " + std::to_string(layout.total()) + " floats)";
}

} // namespace troupe
