#include "models/layer_registry.hpp"

#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/base/errc.hpp"
#include "runtime/config/layer_spec.hpp"

namespace troupe {

using json = nlohmann::json;

struct layer_args::options {
  json values;
  std::set<std::string> read;
  caf::error first_error;
};

layer_args::layer_args(image_shape input, param_layout& layout,
                       std::string type, std::string name, std::string pointer,
                       const std::string& options_json)
  : input_(input), layout_(layout), type_(std::move(type)),
    name_(std::move(name)), pointer_(std::move(pointer)),
    options_(std::make_unique<options>()) {
  options_->values = json::parse(options_json, nullptr, false);
  if (!options_->values.is_object())
    options_->values = json::object();
}

layer_args::~layer_args() = default;

caf::error layer_args::fail(const std::string& reason) const {
  return make_error(errc::invalid_config,
                    pointer_ + " (" + type_ + "): " + reason);
}

namespace {

std::string found(const json& v) {
  return v.dump();
}

} // namespace

int64_t layer_args::integer(const std::string& key, int64_t fallback,
                            int64_t min, int64_t max) {
  options_->read.insert(key);
  auto it = options_->values.find(key);
  if (it == options_->values.end())
    return fallback;
  if (it->is_number_integer()) {
    auto v = it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX
               ? INT64_MAX
               : it->get<int64_t>();
    if (v >= min && v <= max)
      return v;
  }
  if (!options_->first_error)
    options_->first_error = make_error(
      errc::invalid_config, pointer_ + "/" + key + ": expected an integer from "
                              + std::to_string(min) + " to "
                              + std::to_string(max) + ", found " + found(*it));
  return fallback;
}

double layer_args::number(const std::string& key, double fallback, double min,
                          double max) {
  options_->read.insert(key);
  auto it = options_->values.find(key);
  if (it == options_->values.end())
    return fallback;
  if (it->is_number() && it->get<double>() >= min && it->get<double>() <= max)
    return it->get<double>();
  if (!options_->first_error) {
    std::ostringstream range;
    range << "a number from " << min << " to " << max;
    options_->first_error = make_error(
      errc::invalid_config, pointer_ + "/" + key + ": expected " + range.str()
                              + ", found " + found(*it));
  }
  return fallback;
}

std::string layer_args::string(const std::string& key,
                               const std::string& fallback) {
  options_->read.insert(key);
  auto it = options_->values.find(key);
  if (it == options_->values.end())
    return fallback;
  if (it->is_string())
    return it->get<std::string>();
  if (!options_->first_error)
    options_->first_error = make_error(
      errc::invalid_config,
      pointer_ + "/" + key + ": expected a string, found " + found(*it));
  return fallback;
}

bool layer_args::boolean(const std::string& key, bool fallback) {
  options_->read.insert(key);
  auto it = options_->values.find(key);
  if (it == options_->values.end())
    return fallback;
  if (it->is_boolean())
    return it->get<bool>();
  if (!options_->first_error)
    options_->first_error = make_error(
      errc::invalid_config,
      pointer_ + "/" + key + ": expected true or false, found " + found(*it));
  return fallback;
}

caf::error layer_args::finish() const {
  if (options_->first_error)
    return options_->first_error;
  for (auto& [key, value] : options_->values.items())
    if (options_->read.count(key) == 0)
      return make_error(errc::invalid_config,
                        pointer_ + "/" + key + ": unknown key \"" + key + "\"");
  return caf::none;
}

namespace {

std::mutex factories_mutex;
std::map<std::string, layer_factory>& factories() {
  static std::map<std::string, layer_factory> all;
  return all;
}

} // namespace

caf::error register_layer(const std::string& type, layer_factory make) {
  if (!make)
    return make_error(errc::invalid_argument,
                      "register_layer(\"" + type + "\"): no factory");
  if (!add_layer_type_name(type))
    return make_error(errc::invalid_argument,
                      "register_layer(\"" + type
                        + "\"): a built-in layer type or one registered "
                          "already");
  std::lock_guard<std::mutex> guard{factories_mutex};
  factories()[type] = std::move(make);
  return caf::none;
}

const layer_factory* find_layer_factory(const std::string& type) {
  std::lock_guard<std::mutex> guard{factories_mutex};
  auto it = factories().find(type);
  return it == factories().end() ? nullptr : &it->second;
}

} // namespace troupe
