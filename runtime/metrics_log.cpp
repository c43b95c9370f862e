#include "runtime/metrics_log.hpp"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

#include "runtime/errc.hpp"

namespace troupe {

caf::error metrics_log::open(const std::string& dir, const std::string& run) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return make_error(errc::io_error, dir + ": cannot create metrics folder: "
                                        + std::strerror(errno));
  auto base = dir + "/" + run;
  jsonl_.reset(std::fopen((base + ".jsonl").c_str(), "w"));
  if (!jsonl_)
    return make_error(errc::io_error, base + ".jsonl: cannot write: "
                                        + std::strerror(errno));
  csv_.reset(std::fopen((base + ".csv").c_str(), "w"));
  if (!csv_)
    return make_error(errc::io_error, base + ".csv: cannot write: "
                                        + std::strerror(errno));
  std::fprintf(csv_.get(), "seconds,step,epoch,test_accuracy,test_loss\n");
  std::fflush(csv_.get());
  return {};
}

void metrics_log::progress(double seconds, int64_t step, double epoch,
                           double loss, double examples_per_sec) {
  if (!jsonl_)
    return;
  std::fprintf(jsonl_.get(),
               "{\"event\":\"progress\",\"seconds\":%.3f,\"step\":%lld,"
               "\"epoch\":%.4f,\"loss\":%.6g,\"examples_per_sec\":%.1f}\n",
               seconds, static_cast<long long>(step), epoch, loss,
               examples_per_sec);
  std::fflush(jsonl_.get());
}

void metrics_log::evaluation(double seconds, int64_t step, double epoch,
                             double accuracy, double loss) {
  if (!jsonl_)
    return;
  std::fprintf(jsonl_.get(),
               "{\"event\":\"eval\",\"seconds\":%.3f,\"step\":%lld,"
               "\"epoch\":%.4f,\"test_accuracy\":%.6f,\"test_loss\":%.6g}\n",
               seconds, static_cast<long long>(step), epoch, accuracy, loss);
  std::fflush(jsonl_.get());
  std::fprintf(csv_.get(), "%.3f,%lld,%.4f,%.6f,%.6g\n", seconds,
               static_cast<long long>(step), epoch, accuracy, loss);
  std::fflush(csv_.get());
}

} // namespace troupe
