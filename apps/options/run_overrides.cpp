#include "apps/options/run_overrides.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "runtime/base/errc.hpp"
#include "runtime/base/json_text.hpp"
#include "runtime/base/number_text.hpp"

namespace troupe {

namespace {

/// A path from the command line: from the working directory.
std::string absolute(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

} // namespace

std::vector<config_setting> run_overrides::settings() const {
  std::vector<config_setting> out;
  if (!name.empty())
    out.push_back({"/name", json_quoted(name)});
  if (!checkpoint_dir.empty())
    out.push_back(
      {"/training/checkpoint/dir", json_quoted(absolute(checkpoint_dir))});
  if (lr > 0)
    out.push_back({"/training/optimizer/learning_rate",
                   number_text(lr, digits::double_exact)});
  if (batch_size > 0)
    out.push_back({"/training/batch_size", std::to_string(batch_size)});
  if (seed)
    out.push_back({"/training/seed", std::to_string(*seed)});
  if (log_every > 0)
    out.push_back({"/training/log_every_steps", std::to_string(log_every)});
  if (eval_every >= 0)
    out.push_back({"/training/eval_every_steps", std::to_string(eval_every)});
  return out;
}

void add_run_overrides(CLI::App& app, run_overrides& o,
                       const std::string& name_help) {
  app.add_option("--name", o.name, name_help);
  app.add_option("--lr", o.lr, "learning rate (overrides config)")
    ->check(CLI::Validator(
      [](std::string& text) {
        char* end = nullptr;
        double x = std::strtod(text.c_str(), &end);
        return *end == '\0' && std::isfinite(x) && x > 0
                 ? std::string{}
                 : "expected a number > 0, got \"" + text + "\"";
      },
      "X > 0"));
  app.add_option("--batch-size", o.batch_size, "batch size (overrides config)")
    ->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", o.seed, "shuffling seed (overrides config)");
  app
    .add_option("--log-every", o.log_every,
                "progress line every N steps (overrides config)")
    ->check(CLI::PositiveNumber);
  app
    .add_option("--eval-every", o.eval_every,
                "evaluate every N steps, 0 at each epoch's end (overrides "
                "config)")
    ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "checkpoint folder (overrides config; from the working "
                 "directory)");
  app
    .add_option("--checkpoint-every", o.checkpoint_every,
                "checkpoint every N steps, 0 only at the end (overrides "
                "config)")
    ->check(CLI::NonNegativeNumber);
  auto* resume = app.add_flag(
    "--resume", o.resume,
    "continue the newest checkpoint of this config in the checkpoint "
    "folder (the default when it holds one)");
  app
    .add_flag("--fresh", o.fresh,
              "start over at step 0; the folder's checkpoints of earlier "
              "runs are moved into a set-aside-RUN folder inside it")
    ->excludes(resume);
}

caf::error apply_checkpoint_flags(run_config& cfg, const run_overrides& o) {
  const char* flag = o.fresh                   ? "--fresh"
                     : o.resume                ? "--resume"
                     : o.checkpoint_every >= 0 ? "--checkpoint-every"
                                               : nullptr;
  if (flag == nullptr)
    return caf::none;
  if (cfg.training.checkpoint.dir.empty())
    return make_error(errc::invalid_config,
                      std::string{flag}
                        + ": the run keeps no checkpoints (give "
                          "/training/checkpoint/dir or --checkpoint-dir)");
  if (o.resume || o.fresh)
    cfg.training.checkpoint.resume = o.resume;
  if (o.checkpoint_every >= 0)
    cfg.training.checkpoint.every_steps = o.checkpoint_every;
  return caf::none;
}

caf::expected<flagged_config> read_flagged_config(const std::string& path,
                                                  const run_overrides& o) {
  auto text = read_config_text(path);
  if (!text)
    return text.error();
  text = apply_settings(*text, path, o.settings());
  if (!text)
    return text.error();
  auto cfg = parse_run_config(*text, path, config_folder(path));
  if (!cfg)
    return cfg.error();
  if (auto err = apply_checkpoint_flags(*cfg, o))
    return err;
  text = with_base_dir(*text, *cfg);
  if (!text)
    return text.error();
  return flagged_config{std::move(*text), std::move(*cfg)};
}

} // namespace troupe
