// The reader of a model's layer list, /model/layers, and the names of its
// parts. Options and their ranges are checked here, each error naming the
// layer's JSON pointer; shapes are checked when the model is built.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

#include "runtime/base/number_text.hpp"
#include "runtime/config/config_reader.hpp"

namespace troupe {

using namespace config_detail;

const char* to_string(layer_activation a) {
  switch (a) {
    case layer_activation::identity: return "identity";
    case layer_activation::relu: return "relu";
    case layer_activation::tanh: return "tanh";
    case layer_activation::sigmoid: return "sigmoid";
    case layer_activation::gelu: return "gelu";
    case layer_activation::softmax: return "softmax";
  }
  return "?";
}

const char* to_string(layer_spec::kind k) {
  using lk = layer_spec::kind;
  switch (k) {
    case lk::dense: return "dense";
    case lk::conv2d: return "conv2d";
    case lk::maxpool: return "maxpool";
    case lk::avgpool: return "avgpool";
    case lk::flatten: return "flatten";
    case lk::dropout: return "dropout";
    case lk::layernorm: return "layernorm";
    case lk::activation: return "activation";
    case lk::custom: return "custom";
  }
  return "?";
}

const char* to_string(loss_kind k) {
  switch (k) {
    case loss_kind::softmax_cross_entropy: return "softmax_cross_entropy";
    case loss_kind::binary_cross_entropy: return "binary_cross_entropy";
    case loss_kind::mean_squared_error: return "mean_squared_error";
  }
  return "?";
}

std::string to_string(const layer_spec& s) {
  using lk = layer_spec::kind;
  std::ostringstream out;
  out << to_string(s.type);
  switch (s.type) {
    case lk::dense:
      out << " units=" << s.units << " activation=" << to_string(s.act);
      break;
    case lk::conv2d:
      out << " filters=" << s.filters << " kernel=" << s.kernel
          << " stride=" << s.stride << " padding=";
      if (s.same_padding)
        out << "same";
      else
        out << s.padding;
      out << " activation=" << to_string(s.act);
      break;
    case lk::maxpool:
    case lk::avgpool:
      out << " size=" << s.size << " stride=" << s.stride;
      break;
    case lk::flatten: break;
    case lk::dropout:
      out << " rate=" << number_text(s.rate, digits::decimal);
      break;
    case lk::layernorm:
      out << " epsilon=" << number_text(s.epsilon, digits::decimal);
      break;
    case lk::activation: out << " activation=" << to_string(s.act); break;
    case lk::custom: return s.custom_type + " " + s.options;
  }
  return out.str();
}

std::optional<layer_spec> parse_layer_spec(const std::string& text) {
  using lk = layer_spec::kind;
  std::istringstream in{text};
  std::string type;
  in >> type;
  layer_spec s;
  const std::pair<const char*, lk> types[] = {
    {"dense", lk::dense},         {"conv2d", lk::conv2d},
    {"maxpool", lk::maxpool},     {"avgpool", lk::avgpool},
    {"flatten", lk::flatten},     {"dropout", lk::dropout},
    {"layernorm", lk::layernorm}, {"activation", lk::activation}};
  bool built_in = false;
  for (auto& [name, kind] : types)
    if (type == name) {
      s.type = kind;
      built_in = true;
    }
  if (!built_in) { // a registered type: its options' JSON follows
    auto space = text.find(' ');
    if (type.empty() || space == std::string::npos)
      return std::nullopt;
    s.type = lk::custom;
    s.custom_type = type;
    s.options = text.substr(space + 1);
    return s;
  }
  std::string pair;
  while (in >> pair) {
    auto eq = pair.find('=');
    if (eq == std::string::npos)
      return std::nullopt;
    auto key = pair.substr(0, eq), value = pair.substr(eq + 1);
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && *end == '\0';
    if (key == "activation") {
      bool known = false;
      for (auto a : {layer_activation::identity, layer_activation::relu,
                     layer_activation::tanh, layer_activation::sigmoid,
                     layer_activation::gelu, layer_activation::softmax})
        if (value == to_string(a)) {
          s.act = a;
          known = true;
        }
      if (!known)
        return std::nullopt;
    } else if (key == "padding" && value == "same") {
      s.same_padding = true;
    } else if (!number) {
      return std::nullopt;
    } else if (key == "units") {
      s.units = static_cast<int>(x);
    } else if (key == "filters") {
      s.filters = static_cast<int>(x);
    } else if (key == "kernel") {
      s.kernel = static_cast<int>(x);
    } else if (key == "stride") {
      s.stride = static_cast<int>(x);
    } else if (key == "padding") {
      s.same_padding = false;
      s.padding = static_cast<int>(x);
    } else if (key == "size") {
      s.size = static_cast<int>(x);
    } else if (key == "rate") {
      s.rate = x;
    } else if (key == "epsilon") {
      s.epsilon = x;
    } else {
      return std::nullopt;
    }
  }
  if (s.type == lk::conv2d && s.same_padding)
    s.padding = s.kernel / 2;
  return s;
}

namespace {

std::mutex registered_mutex;
std::set<std::string>& registered() {
  static std::set<std::string> names;
  return names;
}

const char* const built_in_types =
  "dense|conv2d|maxpool|avgpool|flatten|dropout|layernorm|activation";

} // namespace

bool add_layer_type_name(const std::string& type) {
  const std::string bars = std::string{"|"} + built_in_types + "|";
  if (type.empty() || bars.find("|" + type + "|") != std::string::npos)
    return false;
  std::lock_guard<std::mutex> guard{registered_mutex};
  return registered().insert(type).second;
}

bool layer_type_registered(const std::string& type) {
  std::lock_guard<std::mutex> guard{registered_mutex};
  return registered().count(type) > 0;
}

namespace {

layer_activation read_activation(object_reader& r, bool required) {
  using la = layer_activation;
  return r.choice<la>("activation", la::identity,
                      {{"identity", la::identity},
                       {"relu", la::relu},
                       {"tanh", la::tanh},
                       {"sigmoid", la::sigmoid},
                       {"gelu", la::gelu},
                       {"softmax", la::softmax}},
                      required);
}

/// conv2d's "padding": "same", "valid" or a count of zeros per side.
void read_padding(object_reader& r, layer_spec& s) {
  auto* v = r.find("padding");
  if (v == nullptr)
    return; // same
  if (v->is_string() && v->get<std::string>() == "same")
    return;
  s.same_padding = false;
  if (v->is_string() && v->get<std::string>() == "valid")
    return;
  if (!v->is_number_integer() || v->get<int64_t>() < 0
      || v->get<int64_t>() >= s.kernel)
    fail(r.at("padding"),
         "\"same\", \"valid\" or an integer from 0 to kernel - 1 ("
           + std::to_string(s.kernel - 1) + ")",
         *v);
  s.padding = static_cast<int>(v->get<int64_t>());
}

layer_spec read_layer(const json& j, const std::string& pointer) {
  using lk = layer_spec::kind;
  object_reader r{j, pointer, ""}; // a layer names no file
  layer_spec s;
  // A registered type's options are its factory's to read.
  if (auto* type = r.find("type");
      type != nullptr && type->is_string()
      && layer_type_registered(type->get<std::string>())) {
    s.type = lk::custom;
    s.custom_type = type->get<std::string>();
    json options = j;
    options.erase("type");
    s.options = options.dump();
    return s;
  }
  s.type = r.choice<lk>("type", lk::dense,
                        {{"dense", lk::dense},
                         {"conv2d", lk::conv2d},
                         {"maxpool", lk::maxpool},
                         {"avgpool", lk::avgpool},
                         {"flatten", lk::flatten},
                         {"dropout", lk::dropout},
                         {"layernorm", lk::layernorm},
                         {"activation", lk::activation}},
                        true);
  switch (s.type) {
    case lk::dense:
      r.require("units");
      s.units = static_cast<int>(r.integer("units", 0, 1, 1 << 20));
      s.act = read_activation(r, false);
      break;
    case lk::conv2d:
      r.require("filters");
      s.filters = static_cast<int>(r.integer("filters", 0, 1, 4096));
      s.kernel = static_cast<int>(r.integer("kernel", 3, 1, 15));
      s.stride = static_cast<int>(r.integer("stride", 1, 1, 15));
      read_padding(r, s);
      if (s.same_padding && s.kernel % 2 == 0)
        throw config_error{errc::invalid_config, r.at("kernel"),
                           "\"same\" padding needs an odd kernel (kernel / 2 "
                           "zeros on every side), found "
                             + std::to_string(s.kernel)
                             + "; give \"padding\" as a count"};
      if (s.same_padding)
        s.padding = s.kernel / 2;
      s.act = read_activation(r, false);
      break;
    case lk::maxpool:
    case lk::avgpool:
      s.size = static_cast<int>(r.integer("size", 2, 1, 64));
      s.stride = static_cast<int>(r.integer("stride", s.size, 1, 64));
      break;
    case lk::flatten: break;
    case lk::dropout: {
      s.rate = r.number("rate", 0.5, 0, 1);
      if (s.rate >= 1)
        fail(r.at("rate"), "a number >= 0 and < 1", *r.find("rate"));
      break;
    }
    case lk::layernorm:
      // Kept as a float: a smaller one rounds to 0 (or scales by up to
      // 1e22 as a subnormal), and a row of equal values (one channel, a
      // dead ReLU) then divides 0 by 0.
      s.epsilon = r.number("epsilon", 1e-5, std::numeric_limits<float>::min(),
                           1);
      break;
    case lk::activation: s.act = read_activation(r, true); break;
    case lk::custom: break; // returned above
  }
  r.finish();
  return s;
}

} // namespace

namespace config_detail {

std::vector<layer_spec> read_layers(const json& j, const std::string& pointer) {
  constexpr size_t max_layers = 256;
  if (!j.is_array() || j.empty() || j.size() > max_layers)
    fail(pointer,
         "an array of 1 to " + std::to_string(max_layers) + " layer objects",
         j);
  std::vector<layer_spec> out;
  for (size_t i = 0; i < j.size(); ++i)
    out.push_back(read_layer(j[i], pointer + "/" + std::to_string(i)));
  return out;
}

} // namespace config_detail

} // namespace troupe
