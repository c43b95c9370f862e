// The parameters a user declares for a model troupe does not compute
// (model.type "external"): a safetensors file of F32 tensors, such as the
// one the Python module writes from a PyTorch model's state_dict(), and
// of buffers (tensor_slot::buffer: BatchNorm's running statistics, its
// int64 num_batches_tracked) that the metadata names (buffers_key,
// safetensors_file.hpp). Its tensors, in the order of their data in the file,
// are the run's layout (the shards split it by size as any other), and its
// values the parameters the run starts from. Checkpoints then hold the same
// names
// ("params/<name>", checkpoint.hpp).
#pragma once

#include <string>
#include <vector>

#include "caf/error.hpp"
#include "caf/expected.hpp"
#include "runtime/params/param_layout.hpp"

namespace troupe {

struct declared_params {
  param_layout layout;
  std::vector<float> values; ///< layout.total(), layout order
};

/// Reads `path`. Errors name the file and, where one is at fault, the
/// tensor: errc::file_not_found, errc::io_error, errc::bad_format (not a
/// safetensors file, a tensor of a dtype other than F32 or a buffer of a
/// dtype that is neither a float nor an integer, with no elements, data
/// out of the file or overlapping another tensor, a NaN or infinite value,
/// an integer beyond 2^24, no tensor at all). A buffer's values are
/// converted to floats.
caf::expected<declared_params> read_declared_params(const std::string& path);

/// Writes `params` to `path` as such a file (what the Python module's
/// write_parameters() writes), atomically: the tensors under their own
/// names, in layout order, buffers as float32 with their dtypes in the
/// metadata. errc::wrong_size when the values do not fit
/// the layout, errc::io_error naming the path.
caf::error write_declared_params(const std::string& path,
                                 const declared_params& params);

/// A digest of `values` (16 hex digits, FNV-1a over their bytes): what
/// tells a parameters file written anew with other values from the one
/// a run started from.
std::string values_digest(const std::vector<float>& values);

/// "external (12 tensors, 101,770 floats)": how a run names such a model.
std::string describe_declared(const param_layout& layout);

} // namespace troupe
