// A model rebuilt from a checkpoint alone: the architecture from the config
// lines every checkpoint records (metadata "config", see run_identity), the
// class count from the output layer's bias, the input shape from the data
// it is to read. What troupe-predict needs, which has no run config.
#pragma once

#include <memory>
#include <string>

#include "caf/expected.hpp"
#include "models/model.hpp"
#include "runtime/checkpoint/checkpoint.hpp"

namespace troupe {

/// The model of checkpoint `ckpt` (read from `path`, named in errors) for
/// samples of height x width x channels, with its parameters loaded.
/// errc::bad_format when the checkpoint records no architecture (written
/// before checkpoints held their config), errc::layout_mismatch when the
/// samples do not fit its first layer.
caf::expected<std::unique_ptr<model>>
model_from_checkpoint(const checkpoint& ckpt, const std::string& path,
                      int height, int width, int channels, compute_backend& be);

} // namespace troupe
