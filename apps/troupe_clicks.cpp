// troupe-clicks: writes click logs whose labels come from a planted model
// (runtime/data/click_data.hpp), for trying click-through models on data whose
// best achievable log-loss is known, and prints that floor.
//
//   troupe-clicks --out DIR [--train N] [--test N] [--numeric K]
//                 [--categorical F] [--values V] [--zipf S]
//                 [--multi-valued M] [--seed S] [--drift D] [--parts P]
//
// Writes DIR/train.tsv (with --parts P: DIR/train-000.tsv .. in stream
// order) and DIR/test.tsv in the tab-separated click-log format the reader
// takes, then one line per figure of the planted model. --drift D: every
// 1000 lines each field's popular values move on to D new ones.
// Exit codes: see apps/exit_codes.hpp.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/command_line.hpp"
#include "apps/exit_codes.hpp"
#include "runtime/data/click_data.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Write click logs drawn from a planted model."};
  troupe::click_generator_config cfg;
  std::string out;
  app.add_option("--out", out, "folder for train.tsv and test.tsv")->required();
  app.add_option("--train", cfg.train, "training lines")
    ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  app.add_option("--test", cfg.test, "test lines")
    ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  app.add_option("--numeric", cfg.schema.numeric, "numeric fields")
    ->check(CLI::Range(0, 1000));
  app.add_option("--categorical", cfg.schema.categorical, "categorical fields")
    ->check(CLI::Range(1, 1000));
  app
    .add_option("--values", cfg.values_per_field,
                "distinct values per categorical field")
    ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 26));
  app.add_option("--zipf", cfg.zipf, "Zipf exponent of the values")
    ->check(CLI::Range(0.01, 10.0));
  app
    .add_option("--multi-valued", cfg.multi_valued,
                "fields of 1 to 3 values per line (the first ones)")
    ->check(CLI::Range(0, 1000));
  app.add_option("--seed", cfg.seed, "the planted model's and the draws'");
  app
    .add_option("--drift", cfg.drift,
                "new values per field per 1000 lines: popular values fade "
                "and the values ever seen grow with the stream")
    ->check(CLI::Range(0.0, 1e6));
  int parts = 1;
  app
    .add_option("--parts", parts,
                "training files train-000.tsv .. in stream order")
    ->check(CLI::Range(1, 100000));
  if (auto code = troupe::parse_command_line(app, argc, argv, "troupe-clicks"))
    return *code;
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST)
    return troupe::report_failure(
      "troupe-clicks", troupe::make_error(troupe::errc::io_error,
                                          out + ": cannot create the folder"));
  if (parts > cfg.train)
    return troupe::report_failure(
      "troupe-clicks",
      troupe::make_error(troupe::errc::invalid_argument,
                         "--parts " + std::to_string(parts)
                           + " is more than the training lines ("
                           + std::to_string(cfg.train) + ")"));
  auto train = out + "/train.tsv", test = out + "/test.tsv";
  std::vector<std::string> files{train};
  if (parts > 1) {
    files.clear();
    char name[32];
    for (int p = 0; p < parts; ++p) {
      std::snprintf(name, sizeof name, "/train-%03d.tsv", p);
      files.push_back(out + name);
    }
    train = out + "/train-*.tsv";
  }
  auto scores = troupe::generate_click_logs(cfg, files, test);
  if (!scores)
    return troupe::report_failure("troupe-clicks", scores.error());
  std::printf("wrote %s (%lld lines) and %s (%lld lines): %d numeric and "
              "%d categorical fields, %llu values each (Zipf %g)\n",
              train.c_str(), static_cast<long long>(cfg.train), test.c_str(),
              static_cast<long long>(cfg.test), cfg.schema.numeric,
              cfg.schema.categorical,
              static_cast<unsigned long long>(cfg.values_per_field), cfg.zipf);
  if (cfg.drift > 0)
    std::printf("drifting: %g new values per field every 1000 lines, %.0f "
                "in all by the end of the training lines (the test lines are "
                "drawn as the stream stands there)\n",
                cfg.drift, cfg.drift * static_cast<double>(cfg.train) / 1000);
  std::printf("planted model: test log-loss %.4f, test AUC %.4f, training "
              "log-loss %.4f, test click rate %.4f\n",
              scores->test_log_loss, scores->test_auc, scores->train_log_loss,
              scores->test_click_rate);
  return 0;
}
