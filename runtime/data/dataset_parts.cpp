// A set of many files ("train": "parts/x-*.npy"): each part read as its
// format reads one file, then joined, the samples one part after another.
// The feeder's plan, the validation split and every worker see one index
// space, so each sample is still leased once per epoch.
#include "runtime/data/dataset.hpp"

#include <algorithm>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

const char* type_name(feature_store::type t) {
  switch (t) {
    case feature_store::type::f32: return "float32";
    case feature_store::type::f64: return "float64";
    case feature_store::type::u8: return "uint8";
  }
  return "?";
}

std::string shape_of(const dataset& d) {
  return std::to_string(d.height) + "x" + std::to_string(d.width) + "x"
         + std::to_string(d.channels);
}

} // namespace

std::string parts_name(const std::string& first, size_t parts) {
  if (parts <= 1)
    return first;
  return first + " and " + std::to_string(parts - 1) + " more part"
         + (parts == 2 ? "" : "s");
}

caf::expected<dataset> join_parts(std::vector<dataset> parts) {
  if (parts.size() == 1)
    return std::move(parts.front());
  if (parts.empty())
    return make_error(errc::invalid_argument, "a dataset of no files");
  const auto& a = parts.front();
  dataset out;
  out.source = parts_name(a.source, parts.size());
  out.height = a.height;
  out.width = a.width;
  out.channels = a.channels;
  out.classes = a.classes;
  std::vector<feature_store> stores;
  for (auto& p : parts) {
    if (p.height != a.height || p.width != a.width || p.channels != a.channels)
      return make_error(errc::bad_format,
                        p.source + ": samples of " + shape_of(p) + ", but "
                          + a.source + " has samples of " + shape_of(a)
                          + " (every part of a set is shaped alike)");
    if (p.has_targets() != a.has_targets()
        || (p.has_targets() && p.classes != a.classes))
      return make_error(errc::bad_format,
                        p.source + ": " + std::to_string(p.classes)
                          + " targets per sample, but " + a.source + " has "
                          + std::to_string(a.classes));
    if (p.features.empty() != a.features.empty()
        || (!p.features.empty() && p.features.stored() != a.features.stored()))
      return make_error(errc::bad_format,
                        p.source + ": features stored as "
                          + type_name(p.features.stored()) + ", but " + a.source
                          + " stores " + type_name(a.features.stored())
                          + " (every part of a set stores one type)");
    out.count += p.count;
    out.classes = std::max(out.classes, p.classes);
    out.labels.insert(out.labels.end(), p.labels.begin(), p.labels.end());
    out.targets.insert(out.targets.end(), p.targets.begin(), p.targets.end());
    if (!p.features.empty())
      stores.push_back(std::move(p.features));
    for (auto& m : p.mapped)
      out.mapped.push_back({m.first + out.count - p.count, m.count, m.file});
    for (auto& f : p.files)
      out.files.push_back({f.path, f.first + out.count - p.count, f.count});
  }
  // The epochs' orders index samples with 32 bits.
  if (out.count > int64_t{UINT32_MAX})
    return make_error(errc::bad_format,
                      out.source + ": " + std::to_string(out.count)
                        + " samples (at most 2^32 - 1 in one set)");
  out.features = feature_store::concat(stores);
  return out;
}

} // namespace troupe
