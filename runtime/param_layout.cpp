#include "runtime/param_layout.hpp"

#include <stdexcept>

#include "caf/expected.hpp"
#include "runtime/errc.hpp"

namespace troupe {

int64_t element_count(const shape& s) {
  int64_t n = 1;
  for (auto d : s)
    n *= d;
  return n;
}

std::string to_string(const shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0)
      out += 'x';
    out += std::to_string(s[i]);
  }
  return out.empty() ? "scalar" : out;
}

size_t param_layout::add(std::string name, shape dims) {
  if (find(name) != nullptr)
    throw std::invalid_argument("duplicate tensor name in layout: " + name);
  for (auto d : dims)
    if (d < 0)
      throw std::invalid_argument("negative dimension in tensor " + name);
  tensor_slot slot;
  slot.name = std::move(name);
  slot.size = static_cast<size_t>(element_count(dims));
  slot.dims = std::move(dims);
  slot.offset = total_;
  total_ += slot.size;
  tensors_.push_back(std::move(slot));
  return tensors_.back().offset;
}

const tensor_slot* param_layout::find(const std::string& name) const {
  for (auto& t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

caf::expected<std::vector<flat_range>> param_layout::split(size_t n) const {
  if (n < 1 || n > total_)
    return make_error(errc::invalid_argument,
                      "cannot split " + std::to_string(total_)
                        + " parameters into " + std::to_string(n)
                        + " shards");
  std::vector<flat_range> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].begin = total_ * i / n;
    out[i].end = total_ * (i + 1) / n;
  }
  return out;
}

caf::error param_layout::compare(const param_layout& other) const {
  if (tensors_.size() != other.tensors_.size())
    return make_error(errc::layout_mismatch,
                      "layout has " + std::to_string(other.tensors_.size())
                        + " tensors, expected "
                        + std::to_string(tensors_.size()));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    auto& a = tensors_[i];
    auto& b = other.tensors_[i];
    if (a.name != b.name || a.dims != b.dims)
      return make_error(errc::layout_mismatch,
                        "tensor " + std::to_string(i) + " is " + b.name + " ("
                          + to_string(b.dims) + "), expected " + a.name + " ("
                          + to_string(a.dims) + ")");
  }
  return caf::none;
}

bool operator==(const param_layout& a, const param_layout& b) {
  return !a.compare(b);
}

} // namespace troupe
