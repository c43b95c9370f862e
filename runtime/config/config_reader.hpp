// The config reader's shared parts, private to runtime/config/config*.cpp (the
// only files that include nlohmann/json.hpp): the error thrown while
// reading, and the reader of one JSON object that names the JSON pointer
// of every error and refuses keys it did not read.
#pragma once

#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/config/config.hpp"
#include "runtime/base/errc.hpp"

namespace troupe::config_detail {

/// Whether `text` holds a control character (names and paths go into the
/// training identity, one "key=value" line per setting).
inline bool has_control(const std::string& text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f)
      return true;
  return false;
}

using json = nlohmann::json;

/// Thrown inside the config reader only; load_run_config turns it into a
/// caf::error.
struct config_error {
  errc code;
  std::string pointer;
  std::string message;
};

inline std::string found(const json& j) {
  switch (j.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::null: return "null";
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::string: return j.dump();
    default: return j.dump();
  }
}

[[noreturn]] inline void fail(const std::string& pointer,
                              const std::string& expected, const json& got) {
  throw config_error{errc::invalid_config, pointer,
                     "expected " + expected + ", found " + found(got)};
}

/// While set, every key a reader looks up, present or not, is added here
/// as its JSON pointer with array indices written "*" (/cluster/nodes/*/
/// host): the keys the readers accept. The configuration reference's test
/// compares them with docs/configuration.md.
inline std::set<std::string>* keys_looked_up = nullptr;

/// `pointer` with every all-digit segment (an array index) written "*".
inline std::string key_pattern(const std::string& pointer) {
  std::string out;
  size_t i = 0;
  while (i < pointer.size()) {
    auto end = pointer.find('/', i + 1);
    if (end == std::string::npos)
      end = pointer.size();
    auto segment = pointer.substr(i + 1, end - i - 1);
    bool index = !segment.empty()
                 && segment.find_first_not_of("0123456789")
                      == std::string::npos;
    out += "/" + (index ? std::string{"*"} : segment);
    i = end;
  }
  return out;
}

/// Reads the members of one JSON object, remembering which keys it consumed
/// so that finish() can refuse the rest. It knows the folder that the
/// config's relative paths start from (its file's folder, or its
/// "base_dir"; empty: the working directory), and hands it to the readers
/// of the objects inside it.
class object_reader {
public:
  object_reader(const json& j, std::string pointer, std::string base)
    : j_(j), pointer_(std::move(pointer)), base_(std::move(base)) {
    if (!j_.is_object())
      fail(pointer_.empty() ? "/" : pointer_, "an object", j_);
  }

  /// The reader of `j`, the object at `key` of this one (or inside it:
  /// `key` may be "nodes/3").
  object_reader inner(const json& j, const std::string& key) const {
    return object_reader{j, at(key), base_};
  }

  std::string at(const std::string& key) const { return pointer_ + "/" + key; }

  const std::string& base() const { return base_; }

  /// `path` as read from the base: unchanged when absolute or empty.
  std::string from_base(const std::string& path) const {
    if (path.empty() || path.front() == '/' || base_.empty())
      return path;
    return (std::filesystem::path{base_} / path).lexically_normal().string();
  }

  /// The string at `key`, a path, read from the base.
  std::string path(const std::string& key, std::string fallback) {
    return from_base(string(key, std::move(fallback)));
  }

  const json* find(const std::string& key) {
    seen_.insert(key);
    if (keys_looked_up != nullptr)
      keys_looked_up->insert(key_pattern(at(key)));
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  const json& require(const std::string& key) {
    if (auto* v = find(key))
      return *v;
    throw config_error{errc::invalid_config, at(key),
                       "missing required key \"" + key + "\""};
  }

  int64_t integer(const std::string& key, int64_t fallback, int64_t min,
                  int64_t max = std::numeric_limits<int64_t>::max()) {
    auto* v = find(key);
    return v == nullptr ? fallback : integer_value(*v, at(key), min, max);
  }

  double number(const std::string& key, double fallback, double min, double max,
                bool min_exclusive = false) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    std::ostringstream range;
    range << "a number " << (min_exclusive ? "> " : ">= ") << min;
    if (max < std::numeric_limits<double>::max())
      range << " and <= " << max;
    if (!v->is_number())
      fail(at(key), range.str(), *v);
    double x = v->get<double>();
    if ((min_exclusive ? x <= min : x < min) || x > max)
      fail(at(key), range.str(), *v);
    return x;
  }

  bool boolean(const std::string& key, bool fallback) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    if (!v->is_boolean())
      fail(at(key), "true or false", *v);
    return v->get<bool>();
  }

  std::string string(const std::string& key, std::string fallback) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    if (!v->is_string())
      fail(at(key), "a string", *v);
    return v->get<std::string>();
  }

  /// One of `names`; returns its index.
  template <class Enum>
  Enum choice(const std::string& key, Enum fallback,
              std::initializer_list<std::pair<const char*, Enum>> names,
              bool required = false) {
    auto* v = required ? &require(key) : find(key);
    if (v == nullptr)
      return fallback;
    std::string options;
    for (auto& [name, value] : names)
      options += (options.empty() ? "" : "|") + std::string{name};
    if (v->is_string())
      for (auto& [name, value] : names)
        if (v->get<std::string>() == name)
          return value;
    fail(at(key), "one of " + options, *v);
  }

  std::vector<int> int_list(const std::string& key, std::vector<int> fallback,
                            int min, int max = std::numeric_limits<int>::max(),
                            size_t max_entries = 64) {
    auto* v = find(key);
    if (v == nullptr)
      return fallback;
    if (!v->is_array() || v->size() > max_entries)
      fail(at(key),
           "an array of at most " + std::to_string(max_entries) + " integers",
           *v);
    std::vector<int> out;
    for (size_t i = 0; i < v->size(); ++i)
      out.push_back(static_cast<int>(
        integer_value((*v)[i], at(key) + "/" + std::to_string(i), min, max)));
    return out;
  }

  std::vector<std::string> string_list(const std::string& key) {
    auto* v = find(key);
    if (v == nullptr)
      return {};
    if (!v->is_array())
      fail(at(key), "an array of strings", *v);
    std::vector<std::string> out;
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string())
        fail(at(key) + "/" + std::to_string(i), "a string", (*v)[i]);
      out.push_back((*v)[i].get<std::string>());
    }
    return out;
  }

  /// Rejects every key that no accessor asked for.
  void finish() const {
    for (auto& [key, value] : j_.items())
      if (seen_.count(key) == 0)
        throw config_error{errc::invalid_config, at(key),
                           "unknown key \"" + key + "\""};
  }

private:
  static int64_t integer_value(const json& v, const std::string& pointer,
                               int64_t min, int64_t max) {
    std::string expected = min == 1   ? "a positive integer"
                           : min == 0 ? "a non-negative integer"
                                      : "an integer >= " + std::to_string(min);
    if (max < std::numeric_limits<int>::max())
      expected += " <= " + std::to_string(max);
    if (!v.is_number_integer())
      fail(pointer, expected, v);
    auto x = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
               v.get<uint64_t>(),
               static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
                                    : v.get<int64_t>();
    if (x < min || x > max)
      fail(pointer, expected, v);
    return x;
  }

  const json& j_;
  std::string pointer_;
  std::string base_;
  std::set<std::string> seen_;
};

/// The "device" key of `r` ("cpu", "gpu", "gpu:N"): training's default,
/// or a node's own.
inline device_spec read_device(object_reader& r) {
  auto text = r.string("device", "cpu");
  auto spec = parse_device(text);
  if (!spec)
    throw config_error{errc::invalid_config, r.at("device"),
                       bad_device_message(text)};
  return *spec;
}

/// Refuses a path with a control character: a file's name goes into the
/// training identity, one "key=value" line per setting.
inline void check_path(const std::string& path, const std::string& pointer) {
  if (has_control(path))
    throw config_error{errc::invalid_config, pointer,
                       "expected a path without control characters, found \""
                         + path + "\""};
}

// The sections, each read by a file of its own.

/// "model" (config_model.cpp).
/// The "model" section; an external model's tables that name no
/// optimizer get `sparse` (training.sparse_optimizer).
model_config read_model(object_reader r, const sparse_optimizer_config& sparse);
sparse_optimizer_config read_sparse_optimizer(object_reader r);

/// "data" (config_data.cpp).
data_config read_data(object_reader r);

/// "training" (config_training.cpp).
training_config read_training(object_reader r);

/// "cluster" (config_cluster.cpp).
cluster_config read_cluster(object_reader r);

/// What the sections require of each other, once all are read
/// (config_checks.cpp): a click model and click logs, an external model
/// and the user's data, float targets and their losses.
void check_click_run(run_config& cfg);
void check_external_run(const run_config& cfg);
void check_targets(run_config& cfg);
void resolve_overlap(run_config& cfg);

/// /model/layers (config_layers.cpp): the layer list, every option
/// checked and defaulted.
std::vector<layer_spec> read_layers(const json& j, const std::string& pointer);

} // namespace troupe::config_detail
