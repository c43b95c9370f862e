#include "python/python_step.hpp"

#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>

#include <pybind11/numpy.h>

#include "runtime/base/errc.hpp"

namespace py = pybind11;

namespace troupe::python {

held_object::held_object(py::object obj) : obj_(std::move(obj)) {}

held_object::~held_object() {
  py::gil_scoped_acquire gil;
  obj_ = py::object{};
}

namespace {

/// `value` itself, or for a torch tensor its NumPy view (no copy for a CPU
/// tensor): what the step's results and keys= are read as.
py::object numpy_of(py::handle value) {
  py::object v = py::reinterpret_borrow<py::object>(value);
  if (py::hasattr(v, "detach") && py::hasattr(v, "numpy"))
    v = v.attr("detach")().attr("cpu")().attr("numpy")();
  return v;
}

/// The name of `obj`'s type, as error texts name what they were given.
std::string type_name(const py::handle& obj) {
  return py::str(py::type::of(obj).attr("__name__"));
}

/// Why `v`, which `what` names, is refused: it is no array.
std::string not_an_array(const std::string& what, py::handle v) {
  return what + " is a " + type_name(v)
         + ", not a NumPy array or a torch tensor";
}

} // namespace

key_source::key_source(py::object keys) {
  if (PyCallable_Check(keys.ptr())) {
    fn_ = std::make_shared<held_object>(std::move(keys));
    return;
  }
  if (!py::isinstance<py::dict>(keys))
    throw py::type_error("keys must be a dict of table name -> integer array "
                         "(one row per training sample) or a function "
                         "keys(samples) -> such a dict, not a "
                         + type_name(keys));
  auto np = py::module_::import("numpy");
  for (auto item : py::reinterpret_borrow<py::dict>(keys)) {
    if (!py::isinstance<py::str>(item.first))
      throw py::type_error("keys: a table name is a str");
    auto name = item.first.cast<std::string>();
    py::array a = np.attr("asarray")(numpy_of(item.second));
    auto kind = a.dtype().kind();
    if ((kind != 'i' && kind != 'u') || a.ndim() < 1 || a.ndim() > 2)
      throw py::value_error("keys[\"" + name
                            + "\"]: expected integers of shape (samples,) or "
                              "(samples, keys per sample), found "
                            + std::string{py::str(a.dtype())} + " of "
                            + std::to_string(a.ndim()) + " dimensions");
    py::array c = np.attr("ascontiguousarray")(a, np.attr("int64"));
    array entry;
    entry.name = name;
    entry.rows = static_cast<size_t>(c.shape(0));
    entry.width = c.ndim() == 2 ? static_cast<size_t>(c.shape(1)) : 1;
    entry.data = static_cast<const int64_t*>(c.data());
    entry.keep = std::make_shared<held_object>(std::move(c));
    arrays_.push_back(std::move(entry));
  }
}

std::vector<std::string> key_source::names() const {
  std::vector<std::string> out;
  for (auto& a : arrays_)
    out.push_back(a.name);
  return out;
}

size_t key_source::rows(const std::string& name) const {
  for (auto& a : arrays_)
    if (a.name == name)
      return a.rows;
  return 0;
}

caf::error key_source::fill(const std::vector<uint32_t>& samples,
                            std::vector<table_rows>& tables) const {
  if (fn_) {
    // The function's dict holds the batch's keys alone: row i is sample i.
    std::unique_ptr<key_source> batch;
    {
      py::gil_scoped_acquire gil;
      try {
        py::array_t<int64_t> indices(static_cast<py::ssize_t>(samples.size()));
        auto* idx = indices.mutable_data();
        for (size_t i = 0; i < samples.size(); ++i)
          idx[i] = samples[i];
        py::object got = fn_->get()(indices);
        if (PyCallable_Check(got.ptr()))
          return make_error(errc::bad_step, "the keys function returned a "
                                            "function, not a dict of arrays");
        batch = std::make_unique<key_source>(std::move(got));
      } catch (py::error_already_set& e) {
        std::string text = e.what();
        return make_error(errc::worker_failed,
                          "the keys function raised "
                            + text.substr(0, text.find('\n')));
      } catch (const std::exception& e) {
        return make_error(errc::bad_step,
                          std::string{"the keys function's result: "}
                            + e.what());
      }
    }
    std::vector<uint32_t> own(samples.size());
    for (size_t i = 0; i < own.size(); ++i)
      own[i] = static_cast<uint32_t>(i);
    return batch->fill(own, tables);
  }
  std::string known;
  for (auto& t : tables)
    known += (known.empty() ? "" : ", ") + t.name;
  for (auto& a : arrays_) {
    bool used = false;
    for (auto& t : tables)
      used = used || t.name == a.name;
    if (!used)
      return make_error(errc::bad_step,
                        "keys name table " + a.name
                          + ", which the model has not (its tables: " + known
                          + ")");
  }
  for (auto& t : tables) {
    const array* a = nullptr;
    for (auto& candidate : arrays_)
      if (candidate.name == t.name)
        a = &candidate;
    if (a == nullptr)
      return make_error(errc::bad_step, "no keys for table " + t.name);
    t.width = a->width;
    t.keys.resize(samples.size() * a->width);
    for (size_t i = 0; i < samples.size(); ++i) {
      if (samples[i] >= a->rows)
        return make_error(errc::bad_step, "table " + t.name + ": sample "
                                            + std::to_string(samples[i])
                                            + " has no keys (keys[" + t.name
                                            + "] has " + std::to_string(a->rows)
                                            + " rows)");
      std::memcpy(t.keys.data() + i * a->width,
                  a->data + static_cast<size_t>(samples[i]) * a->width,
                  a->width * sizeof(int64_t));
    }
  }
  return {};
}

namespace {

std::string shape_text(const shape& dims) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < dims.size(); ++i)
    out << (i > 0 ? ", " : "") << dims[i];
  out << (dims.size() == 1 ? ",)" : ")");
  return out.str();
}

/// The NumPy dtype of a buffer's safetensors dtype.
py::dtype numpy_dtype(const std::string& dtype) {
  static const std::pair<const char*, const char*> names[] = {
    {"F64", "float64"}, {"F32", "float32"}, {"I64", "int64"}, {"I32", "int32"},
    {"I16", "int16"},   {"I8", "int8"},     {"U8", "uint8"},  {"BOOL", "bool"}};
  for (auto& [st, np] : names)
    if (dtype == st)
      return py::dtype(np);
  return py::dtype::of<float>();
}

/// Tensor `t` as a read-only NumPy view of the block that holds it, or of
/// a gathered copy; the array keeps what it views alive. A buffer of
/// another dtype than float32 comes as a copy in its own dtype (an int64
/// num_batches_tracked as int64), so load_state_dict takes it as it is.
py::array view_of(const pulled_params& p, const tensor_slot& t) {
  if (t.buffer && t.dtype != "F32") {
    std::vector<float> scratch;
    const float* at = p.tensor(t, scratch);
    std::vector<py::ssize_t> dims(t.dims.begin(), t.dims.end());
    py::object floats = py::array_t<float>(dims, at);
    if (t.dtype[0] != 'F') // an integer: the nearest, not truncated
      floats = py::module_::import("numpy").attr("rint")(floats);
    py::array a = floats.attr("astype")(numpy_dtype(t.dtype));
    a.attr("setflags")(py::arg("write") = false);
    return a;
  }
  std::shared_ptr<const void> keep = p.block_holding(t);
  const float* at = nullptr;
  if (keep) {
    std::vector<float> unused;
    at = p.tensor(t, unused);
  } else {
    auto gathered = std::make_shared<std::vector<float>>();
    at = p.tensor(t, *gathered);
    keep = gathered;
  }
  auto* owner = new std::shared_ptr<const void>(std::move(keep));
  py::capsule capsule(owner, [](void* ptr) {
    delete static_cast<std::shared_ptr<const void>*>(ptr);
  });
  std::vector<py::ssize_t> dims(t.dims.begin(), t.dims.end());
  py::array a(py::dtype::of<float>(), dims, at, capsule);
  // The block is the shard's (copy on write there) or the data plane's:
  // a step that wrote into it would change what other workers pull.
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

/// What a step returned for tensor `t` as a NumPy array of its shape, or
/// (an empty object) what is wrong with it in `why`; `what` names it in
/// that ("the gradient of w", "the value of buffer bn.running_mean").
py::object array_of(py::handle value, const tensor_slot& t,
                    const std::string& what, std::string& why) {
  py::object v = numpy_of(value);
  // A NumPy scalar (np.float32(x), the gradient of a shape-() tensor).
  if (!py::isinstance<py::array>(v) && py::hasattr(v, "dtype"))
    v = py::array::ensure(v);
  if (!py::isinstance<py::array>(v)) {
    why = not_an_array(what, v);
    return {};
  }
  auto a = py::reinterpret_borrow<py::array>(v);
  shape got(a.shape(), a.shape() + a.ndim());
  if (got != t.dims) {
    why = what + " has shape " + shape_text(got) + ", expected "
          + shape_text(t.dims);
    return {};
  }
  return std::move(a);
}

/// The user's gradient of tensor `t` into `out`, or what is wrong with it.
std::string take_gradient(py::handle value, const tensor_slot& t, float* out) {
  std::string why;
  auto what = "the gradient of " + t.name;
  auto v = array_of(value, t, what, why);
  if (!v)
    return why;
  auto a = py::reinterpret_borrow<py::array>(v);
  if (!a.dtype().is(py::dtype::of<float>()))
    return what + " has dtype " + std::string{py::str(a.dtype())}
           + ", expected float32";
  // Contiguous arrays are read in place; others are copied once here.
  auto c = py::array_t<float, py::array::c_style>::ensure(a);
  std::memcpy(out, c.data(), t.size * sizeof(float));
  return {};
}

/// What a step returned for buffer `t` (its value after the step, of any
/// real dtype) as the change the shards subtract: `before` - new, into
/// `out`; or what is wrong with it.
std::string take_buffer(py::handle value, const tensor_slot& t,
                        const float* before, float* out) {
  std::string why;
  auto what = "the value of buffer " + t.name;
  auto v = array_of(value, t, what, why);
  if (!v)
    return why;
  auto a = py::reinterpret_borrow<py::array>(v);
  auto kind = a.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    return what + " has dtype " + std::string{py::str(a.dtype())}
           + ", not a number";
  auto d =
    py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
  const double* now = d.data();
  for (size_t i = 0; i < t.size; ++i)
    out[i] = static_cast<float>(static_cast<double>(before[i]) - now[i]);
  return {};
}

/// The parameters as a dict of tensor names to read-only views.
py::dict params_dict(const pulled_params& p) {
  py::dict params;
  for (auto& t : p.layout->tensors())
    params[py::str(t.name)] = view_of(p, t);
  return params;
}

/// The first line of a Python exception (its type and message).
std::string first_line(const py::error_already_set& e) {
  std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

/// An int64 array of `dims` copied from `from`.
py::array_t<int64_t> int64_array(const std::vector<int64_t>& from,
                                 std::vector<py::ssize_t> dims) {
  py::array_t<int64_t> out(dims);
  std::memcpy(out.mutable_data(), from.data(), from.size() * sizeof(int64_t));
  return out;
}

/// Table `r`'s rows as the step gets them: a troupe.Rows of its keys,
/// distinct keys, inverse and values (a writable view of the pulled rows,
/// which torch.from_numpy takes without a copy).
py::object rows_object(const py::object& rows_class, const table_rows& r,
                       size_t samples) {
  auto n = static_cast<py::ssize_t>(samples);
  auto w = static_cast<py::ssize_t>(r.width);
  auto u = static_cast<py::ssize_t>(r.unique.size());
  auto* owner = new std::shared_ptr<std::vector<float>>(r.values);
  py::capsule capsule(owner, [](void* ptr) {
    delete static_cast<std::shared_ptr<std::vector<float>>*>(ptr);
  });
  py::array values(py::dtype::of<float>(),
                   std::vector<py::ssize_t>{u, static_cast<py::ssize_t>(r.dim)},
                   r.values->data(), capsule);
  return rows_class(r.name, int64_array(r.keys, {n, w}),
                    int64_array(r.unique, {u}), int64_array(r.inverse, {n, w}),
                    values);
}

/// The step's gradient of table `r`'s rows into r.grads: (distinct keys,
/// dim) as it is, or (samples, width, dim) summed per distinct key; or
/// what is wrong with it.
std::string take_row_gradient(py::handle value, table_rows& r, size_t samples) {
  py::object v = numpy_of(value);
  auto what = "the gradient of table " + r.name;
  if (!py::isinstance<py::array>(v))
    return not_an_array(what, v);
  auto a = py::reinterpret_borrow<py::array>(v);
  const auto dim = static_cast<size_t>(r.dim);
  using extent = shape::value_type;
  shape per_key{static_cast<extent>(r.unique.size()), static_cast<extent>(dim)};
  shape per_use{static_cast<extent>(samples), static_cast<extent>(r.width),
                static_cast<extent>(dim)};
  shape got(a.shape(), a.shape() + a.ndim());
  if (got != per_key && got != per_use)
    return what + " has shape " + shape_text(got) + ", expected "
           + shape_text(per_key) + " (one row per distinct key) or "
           + shape_text(per_use) + " (one per key of each sample)";
  if (!a.dtype().is(py::dtype::of<float>()))
    return what + " has dtype " + std::string{py::str(a.dtype())}
           + ", expected float32";
  auto c = py::array_t<float, py::array::c_style>::ensure(a);
  const float* g = c.data();
  if (got == per_key) {
    std::memcpy(r.grads.data(), g, r.grads.size() * sizeof(float));
    return {};
  }
  for (size_t i = 0; i < r.inverse.size(); ++i) {
    if (r.inverse[i] < 0)
      continue;
    float* to = r.grads.data() + static_cast<size_t>(r.inverse[i]) * dim;
    for (size_t d = 0; d < dim; ++d)
      to[d] += g[i * dim + d];
  }
  return {};
}

class python_step final : public external_step {
public:
  python_step(int32_t worker, std::shared_ptr<held_object> fn,
              std::shared_ptr<std::mutex> one_at_a_time,
              std::shared_ptr<const key_source> keys)
    : worker_(worker), fn_(std::move(fn)), turn_(std::move(one_at_a_time)),
      keys_(std::move(keys)) {}

  caf::error batch_keys(const std::vector<uint32_t>& samples,
                        std::vector<table_rows>& tables) override {
    if (tables.empty())
      return {};
    if (!keys_)
      return make_error(errc::bad_step,
                        "the model has embedding tables, and no keys= says "
                        "which rows each sample uses (train(..., keys={\""
                          + tables[0].name + "\": array}))");
    return keys_->fill(samples, tables);
  }

  caf::expected<batch_loss> step(const pulled_params& p,
                                 const std::vector<uint32_t>& samples,
                                 float* grads) override {
    std::vector<table_rows> none;
    return step(p, samples, grads, none);
  }

  caf::expected<batch_loss> step(const pulled_params& p,
                                 const std::vector<uint32_t>& samples,
                                 float* grads,
                                 std::vector<table_rows>& tables) override {
    // Taken before the GIL (which the step's own code may release, as
    // torch does in its kernels), so a thread waiting here holds nothing.
    std::lock_guard<std::mutex> turn{*turn_};
    py::gil_scoped_acquire gil;
    try {
      auto params = params_dict(p);
      py::array_t<int64_t> indices(static_cast<py::ssize_t>(samples.size()));
      auto* idx = indices.mutable_data();
      for (size_t i = 0; i < samples.size(); ++i)
        idx[i] = samples[i];
      py::object result;
      if (tables.empty()) {
        result = fn_->get()(params, indices);
      } else {
        if (!rows_class_)
          rows_class_ = std::make_unique<held_object>(
            py::module_::import("troupe").attr("Rows"));
        py::dict rows;
        for (auto& r : tables) {
          if (p.layout->find(r.name) != nullptr)
            return refuse("table " + r.name
                          + " has the name of a tensor of the model: "
                            "rename one");
          rows[py::str(r.name)] = rows_object(rows_class_->get(), r,
                                              samples.size());
        }
        result = fn_->get()(params, indices, rows);
      }
      if (!py::isinstance<py::tuple>(result)
          || (py::len(result) != 2 && py::len(result) != 3)
          || !py::isinstance<py::dict>(result[py::int_(0)]))
        return refuse("returned " + type_name(result)
                      + "; a step returns (gradients, loss_sum) or "
                        "(gradients, loss_sum, hits), gradients a dict of "
                        "the model's tensor names");
      auto tuple = py::reinterpret_borrow<py::tuple>(result);
      auto given = py::reinterpret_borrow<py::dict>(tuple[0]);
      std::vector<float> scratch;
      for (auto& t : p.layout->tensors()) {
        if (!given.contains(py::str(t.name)))
          return refuse(t.buffer
                          ? "the gradients give no value for buffer " + t.name
                              + " (a buffer's entry is its value "
                                "after the step: add "
                                "dict(model.named_buffers()))"
                          : "the gradients name no tensor " + t.name);
        auto value = given[py::str(t.name)];
        auto why = t.buffer ? take_buffer(value, t, p.tensor(t, scratch),
                                          grads + t.offset)
                            : take_gradient(value, t, grads + t.offset);
        if (!why.empty())
          return refuse(why);
      }
      for (auto& r : tables) {
        if (!given.contains(py::str(r.name)))
          return refuse("the gradients name no table " + r.name
                        + " (its rows' gradient, e.g. "
                          "troupe.step_result(model, rows))");
        auto why = take_row_gradient(given[py::str(r.name)], r, samples.size());
        if (!why.empty())
          return refuse(why);
      }
      if (py::len(given) != p.layout->tensors().size() + tables.size())
        for (auto item : given) {
          auto name = py::str(item.first).cast<std::string>();
          bool table = false;
          for (auto& r : tables)
            table = table || r.name == name;
          if (p.layout->find(name) == nullptr && !table)
            return refuse("the gradients name " + name + ", which is no "
                          + (tables.empty() ? "tensor" : "tensor or table")
                          + " of the model");
        }
      batch_loss out;
      out.loss_sum = tuple[1].cast<double>();
      if (py::len(tuple) == 3)
        out.correct = tuple[2].cast<int64_t>();
      return out;
    } catch (py::error_already_set& e) {
      // The traceback goes to the worker's log; the error names the
      // exception.
      std::cerr << "worker " << worker_ << ": the step function raised:\n"
                << e.what() << std::endl;
      // An exception may be a passing one (a file, memory): the chief
      // restarts the worker.
      return make_error(errc::worker_failed,
                        "the step function raised " + first_line(e));
    } catch (const py::cast_error& e) {
      return refuse(std::string{"its result: "} + e.what());
    }
  }

private:
  /// A result the contract refuses: the same step returns it again, so
  /// the run ends with it (errc::bad_step) instead of restarting.
  caf::error refuse(const std::string& why) const {
    return make_error(errc::bad_step, why);
  }

  int32_t worker_;
  std::shared_ptr<held_object> fn_;
  std::shared_ptr<std::mutex> turn_;
  std::shared_ptr<const key_source> keys_;
  std::unique_ptr<held_object> rows_class_; ///< troupe.Rows
};

} // namespace

external_step_factory python_steps(std::shared_ptr<held_object> fn,
                                   call_turn turn,
                                   std::shared_ptr<const key_source> keys) {
  return [fn, turn, keys](int32_t worker) -> std::shared_ptr<external_step> {
    return std::make_shared<python_step>(worker, fn, turn, keys);
  };
}

external_evaluator python_evaluator(std::shared_ptr<held_object> fn,
                                    call_turn turn) {
  return [fn, turn](const pulled_params& p) -> caf::expected<eval_result> {
    auto refuse = [](const std::string& why) {
      return make_error(errc::invalid_argument, why);
    };
    std::lock_guard<std::mutex> one_at_a_time{*turn};
    py::gil_scoped_acquire gil;
    try {
      py::object result = fn->get()(params_dict(p));
      if (!py::isinstance<py::tuple>(result)
          || (py::len(result) != 2 && py::len(result) != 3))
        return refuse("the evaluate function returned " + type_name(result)
                      + "; it returns (accuracy, loss) or (accuracy, loss, "
                        "count)");
      auto tuple = py::reinterpret_borrow<py::tuple>(result);
      eval_result out;
      out.accuracy = tuple[0].cast<double>();
      out.loss = tuple[1].cast<double>();
      if (py::len(tuple) == 3)
        out.count = tuple[2].cast<int64_t>();
      return out;
    } catch (py::error_already_set& e) {
      // The chief's log gets the traceback; the run's error names the
      // exception.
      std::cerr << "the evaluate function raised:\n" << e.what() << std::endl;
      return refuse("the evaluate function raised " + first_line(e));
    } catch (const py::cast_error& e) {
      return refuse(std::string{"the evaluate function's result: "} + e.what());
    }
  };
}

} // namespace troupe::python
