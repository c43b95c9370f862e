#include "runtime/base/metrics_log.hpp"

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// `text` as a JSON string: quotes, backslashes and control characters
/// escaped (names come from configs: any UTF-8 passes through).
std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

} // namespace

caf::error metrics_log::prepare(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return make_error(errc::io_error, dir + ": cannot create metrics folder: "
                                        + std::strerror(errno));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return make_error(errc::io_error, dir + ": cannot write metrics there: "
                                        + std::strerror(errno));
  return {};
}

caf::error metrics_log::open(const std::string& dir, const metrics_run& run) {
  if (auto err = prepare(dir))
    return err;
  base_ = dir + "/" + run.name + "-" + run.run_id;
  auto label = "# run=" + run.name + " run_id=" + run.run_id
               + " mode=" + run.mode + " workers=" + std::to_string(run.workers)
               + " data_partition=" + run.partition + "\n";
  auto open_one = [&](file& f, const std::string& path,
                      const char* header) -> caf::error {
    f.reset(std::fopen(path.c_str(), "a"));
    if (!f)
      return make_error(errc::io_error,
                        path + ": cannot write: " + std::strerror(errno));
    if (header != nullptr && std::ftell(f.get()) == 0) {
      std::fputs(label.c_str(), f.get());
      std::fputs(header, f.get());
      std::fflush(f.get());
    }
    return {};
  };
  if (auto err = open_one(jsonl_, base_ + ".jsonl", nullptr))
    return err;
  score_key_ = "test_" + run.score;
  score_tag_ = "test/" + run.score;
  auto header = "seconds,step,epoch," + score_key_ + ",test_loss\n";
  if (auto err = open_one(csv_, base_ + ".csv", header.c_str()))
    return err;
  if (auto err = open_one(progress_csv_, base_ + ".progress.csv",
                          "seconds,step,epoch,loss,examples_per_sec\n"))
    return err;
  std::fprintf(jsonl_.get(),
               "{\"event\":\"run\",\"name\":%s,\"run_id\":%s,\"mode\":%s,"
               "\"workers\":%d,\"data_partition\":%s,\"start_step\":%lld}\n",
               json_quote(run.name).c_str(), json_quote(run.run_id).c_str(),
               json_quote(run.mode).c_str(), run.workers,
               json_quote(run.partition).c_str(),
               static_cast<long long>(run.start_step));
  std::fflush(jsonl_.get());
  return tensorboard_.open(dir + "/tensorboard/" + run.name + "-" + run.run_id);
}

void metrics_log::emit(const std::string& record) {
  if (listener_)
    listener_(record);
  if (!jsonl_)
    return;
  std::fputs(record.c_str(), jsonl_.get());
  std::fputc('\n', jsonl_.get());
  std::fflush(jsonl_.get());
}

bool metrics_log::event(const char* format, ...) {
  if (!jsonl_ && !listener_)
    return false;
  char line[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  emit(line);
  return true;
}

void metrics_log::csv_line(const file& csv, const char* format, ...) {
  if (!csv)
    return;
  va_list args;
  va_start(args, format);
  std::vfprintf(csv.get(), format, args);
  va_end(args);
  std::fflush(csv.get());
}

void metrics_log::progress(double seconds, int64_t step, double epoch,
                           double loss, double examples_per_sec) {
  if (event("{\"event\":\"progress\",\"seconds\":%.3f,\"step\":%lld,"
            "\"epoch\":%.4f,\"loss\":%.6g,\"examples_per_sec\":%.1f}",
            seconds, static_cast<long long>(step), epoch, loss,
            examples_per_sec))
    csv_line(progress_csv_, "%.3f,%lld,%.4f,%.6g,%.1f\n", seconds,
             static_cast<long long>(step), epoch, loss, examples_per_sec);
  tensorboard_.scalar("train/loss", step, loss);
  tensorboard_.scalar("train/examples_per_sec", step, examples_per_sec);
  tensorboard_.scalar("train/epoch", step, epoch);
}

void metrics_log::worker(int32_t id, double seconds, int64_t step, double loss,
                         double examples_per_sec) {
  event("{\"event\":\"worker\",\"worker\":%d,\"seconds\":%.3f,"
        "\"step\":%lld,\"loss\":%.6g,\"examples_per_sec\":%.1f}",
        id, seconds, static_cast<long long>(step), loss, examples_per_sec);
}

void metrics_log::evaluation(double seconds, int64_t step, double epoch,
                             double score, double loss) {
  if (event("{\"event\":\"eval\",\"seconds\":%.3f,\"step\":%lld,"
            "\"epoch\":%.4f,\"%s\":%.6f,\"test_loss\":%.6g}",
            seconds, static_cast<long long>(step), epoch, score_key_.c_str(),
            score, loss))
    csv_line(csv_, "%.3f,%lld,%.4f,%.6f,%.6g\n", seconds,
             static_cast<long long>(step), epoch, score, loss);
  tensorboard_.scalar(score_tag_, step, score);
  tensorboard_.scalar("test/loss", step, loss);
}

} // namespace troupe
