#include "models/checkpoint_eval.hpp"

#include <ostream>

#include "models/model.hpp"
#include "models/trainer.hpp"
#include "runtime/checkpoint/checkpoint.hpp"

namespace troupe {

namespace {

std::string right(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

} // namespace

caf::error evaluate_checkpoint(const run_config& cfg, const train_test& data,
                               compute_backend& be, const std::string& path,
                               std::ostream& out) {
  auto ckpt = read_checkpoint(path);
  if (!ckpt)
    return ckpt.error();
  auto made = make_model(cfg.model, data.train.height, data.train.width,
                         data.train.channels, data.train.classes, be);
  if (!made)
    return made.error();
  model& m = **made;
  if (auto err = check_layout(*ckpt, m.layout(), path))
    return err;
  m.set_params(ckpt->params.data());
  auto r = evaluate_per_class(m, data.test, cfg.training.batch_size);
  out << "evaluate: " << path << " (step " << ckpt->step << ", " << m.summary()
      << ") on " << r.overall.count << " test samples of " << data.test.source
      << "\n"
      << describe_scores(r.overall, "test") << "\n";
  const size_t classes = r.confusion.size();
  if (classes == 0) { // float targets: no classes to break the scores into
    out.flush();
    return caf::none;
  }
  out << "class  samples  accuracy\n";
  for (size_t c = 0; c < classes; ++c) {
    int64_t n = 0;
    for (auto v : r.confusion[c])
      n += v;
    out << right(std::to_string(c), 5) << right(std::to_string(n), 9)
        << (n > 0 ? right(fixed(static_cast<double>(r.confusion[c][c])
                                  / static_cast<double>(n),
                                4),
                          10)
                  : right("-", 10))
        << "\n";
  }
  // Columns as wide as the largest count (or the class number).
  size_t width = std::to_string(classes - 1).size();
  for (auto& row : r.confusion)
    for (auto v : row)
      width = std::max(width, std::to_string(v).size());
  out << "confusion (rows: label, columns: predicted)\n"
      << std::string(width, ' ');
  for (size_t c = 0; c < classes; ++c)
    out << " " << right(std::to_string(c), width);
  out << "\n";
  for (size_t l = 0; l < classes; ++l) {
    out << right(std::to_string(l), width);
    for (auto v : r.confusion[l])
      out << " " << right(std::to_string(v), width);
    out << "\n";
  }
  out.flush();
  return caf::none;
}

} // namespace troupe
