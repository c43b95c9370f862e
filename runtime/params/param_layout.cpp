#include "runtime/params/param_layout.hpp"

#include <algorithm>
#include <stdexcept>

#include "caf/expected.hpp"
#include "runtime/base/errc.hpp"

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

size_t param_layout::add_buffer(std::string name, shape dims,
                                std::string dtype) {
  auto offset = add(std::move(name), std::move(dims));
  tensors_.back().buffer = true;
  tensors_.back().dtype = std::move(dtype);
  return offset;
}

bool param_layout::has_buffers() const {
  return std::any_of(tensors_.begin(), tensors_.end(),
                     [](const tensor_slot& t) { return t.buffer; });
}

std::vector<flat_range> param_layout::buffers_within(flat_range range) const {
  std::vector<flat_range> out;
  for (auto& t : tensors_) {
    auto begin = std::max(t.offset, range.begin);
    auto end = std::min(t.offset + t.size, range.end);
    if (!t.buffer || begin >= end)
      continue;
    if (!out.empty() && out.back().end == begin - range.begin)
      out.back().end = end - range.begin; // adjacent buffers: one part
    else
      out.push_back(flat_range{begin - range.begin, end - range.begin});
  }
  return out;
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
                        + " parameters into " + std::to_string(n) + " shards");
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

std::vector<float> slice_of(const std::vector<float>& flat, flat_range range) {
  auto b = flat.begin() + static_cast<std::ptrdiff_t>(range.begin);
  return {b, b + static_cast<std::ptrdiff_t>(range.size())};
}

caf::expected<std::vector<float>>
gather_parts(const std::vector<flat_range>& ranges,
             const std::vector<const std::vector<float>*>& parts) {
  if (parts.size() != ranges.size())
    return make_error(errc::wrong_size,
                      std::to_string(parts.size()) + " parts for "
                        + std::to_string(ranges.size()) + " ranges");
  size_t end = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].begin != end)
      return make_error(errc::wrong_size, "range " + std::to_string(i)
                                            + " does not follow range "
                                            + std::to_string(i - 1));
    if (parts[i] == nullptr || parts[i]->size() != ranges[i].size())
      return make_error(errc::wrong_size,
                        "part " + std::to_string(i) + " has "
                          + std::to_string(parts[i] ? parts[i]->size() : 0)
                          + " values for a range of "
                          + std::to_string(ranges[i].size()));
    end = ranges[i].end;
  }
  std::vector<float> all(end);
  for (size_t i = 0; i < ranges.size(); ++i)
    std::copy(parts[i]->begin(), parts[i]->end(),
              all.begin() + static_cast<std::ptrdiff_t>(ranges[i].begin));
  return all;
}

} // namespace troupe
