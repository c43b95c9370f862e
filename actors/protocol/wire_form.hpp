// Each data message's wire form, written once: shard_data_messages.hpp
// describes every message a worker and a shard exchange (gradient_push,
// float_block, row_request, row_block, row_push, push_ack) as its fields
// in order, each named by the slot of a data-plane frame header it takes,
// and its payload (floats, or row ids then floats):
//
//   template <class Form>
//   auto wire_form(Form& w, push_ack& x) {
//     return w("push_ack", wire::at<wire::slot::tag>(x.version),
//              wire::at<wire::slot::flag>(x.stale));
//   }
//
// Both wire forms are derived from that one description: BASP's here
// (wire::inspect, which each message's inspect overload calls: serialized
// field by field, payloads as raw blocks, see float_wire.hpp), the data
// plane's frame in actors/data_plane/data_frames.hpp (the fields into the
// header's slots, the payload after it, written from and read into the
// buffers the actors keep). A field added to a message and to its
// description travels both ways.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "actors/protocol/float_wire.hpp"
#include "caf/meta/type_name.hpp"

namespace troupe::wire {

/// Where a field sits in a data-plane frame header (data_frame in
/// actors/data_plane/data_link.hpp). On BASP a field is just its value.
enum class slot { shard, worker, tag, batch, table, flag };

/// A scalar field of a message and the header slot it takes.
template <slot Slot, class T>
struct field {
  T& value;
};

template <slot Slot, class T>
field<Slot, T> at(T& value) {
  return {value};
}

/// Floats shared with whoever made them (a shard's values, a worker's row
/// gradients): written from that buffer, read into a pooled one.
struct floats {
  std::shared_ptr<const std::vector<float>>& values;
};

/// Floats [offset, offset + size) of a shared buffer (a push's slice of the
/// worker's gradient): only the slice travels, and it arrives as a buffer
/// of its own (offset 0).
struct float_slice {
  std::shared_ptr<const std::vector<float>>& buffer;
  uint64_t& offset;
  uint64_t& size;
};

/// Row ids. In a description they come before the floats of the message.
struct row_ids {
  std::vector<uint64_t>& values;
};

// -- BASP's form --------------------------------------------------------------

/// Writes a description with CAF's serializer.
struct basp_writer {
  caf::serializer& f;

  template <class... Parts>
  caf::error operator()(const char*, Parts... parts) {
    caf::error err;
    (void)((err = put(parts), !err) && ...);
    return err;
  }

  template <slot Slot, class T>
  caf::error put(field<Slot, T> p) {
    return f(p.value);
  }
  caf::error put(floats p) {
    return detail::write_floats(f, p.values ? p.values->data() : nullptr,
                                p.values ? p.values->size() : 0);
  }
  caf::error put(float_slice p) {
    return detail::write_floats(
      f, p.buffer ? p.buffer->data() + p.offset : nullptr, p.size);
  }
  caf::error put(row_ids p) { return detail::write_ids(f, p.values); }
};

/// Reads a description with CAF's deserializer; payloads land in pooled
/// buffers, and no length is believed beyond what the message holds.
struct basp_reader {
  caf::deserializer& f;

  template <class... Parts>
  caf::error operator()(const char*, Parts... parts) {
    caf::error err;
    (void)((err = get(parts), !err) && ...);
    return err;
  }

  template <slot Slot, class T>
  caf::error get(field<Slot, T> p) {
    return f(p.value);
  }
  caf::error get(floats p) {
    std::shared_ptr<std::vector<float>> v;
    if (auto err = detail::read_pooled(f, v))
      return err;
    p.values = std::move(v);
    return {};
  }
  caf::error get(float_slice p) {
    std::shared_ptr<std::vector<float>> v;
    if (auto err = detail::read_pooled(f, v))
      return err;
    p.offset = 0;
    p.size = v->size();
    p.buffer = std::move(v);
    return {};
  }
  caf::error get(row_ids p) { return detail::read_ids(f, p.values); }
};

/// Any other inspector (to_string, CAF's type-erased values): the type's
/// name, its fields, and the length of each payload instead of its bytes.
template <class Inspector>
struct summary {
  Inspector& f;

  template <class... Parts>
  typename Inspector::result_type operator()(const char* name, Parts... parts) {
    return f(caf::meta::type_name(name), shown(parts)...);
  }

  template <slot Slot, class T>
  static T& shown(field<Slot, T> p) {
    return p.value;
  }
  static uint64_t shown(floats p) { return p.values ? p.values->size() : 0; }
  static uint64_t shown(float_slice p) { return p.size; }
  static uint64_t shown(row_ids p) { return p.values.size(); }
};

/// The inspect of every described message.
template <class Inspector, class Message>
typename Inspector::result_type inspect(Inspector& f, Message& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    basp_writer w{f};
    return wire_form(w, x);
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    basp_reader r{f};
    return wire_form(r, x);
  } else {
    summary<Inspector> s{f};
    return wire_form(s, x);
  }
}

} // namespace troupe::wire
