// The click model in one process (models/click_model): on click logs drawn
// from a planted model it learns to within 2.5% of the planted model's
// own test log-loss, pulling and pushing each row once per step.
#include "models/click_model.hpp"

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <numeric>

#include "runtime/compute/cpu_backend.hpp"
#include "runtime/data/dataset.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

BOOST_AUTO_TEST_SUITE(click_model)

BOOST_AUTO_TEST_CASE(learns_the_planted_model_to_within_a_few_percent) {
  temp_dir dir;
  click_generator_config gen;
  gen.schema = {2, 4, uint64_t{1} << 22};
  // Enough logs that the 800 values are each seen often: with 100k the
  // model stopped 3.6% above the planted log-loss, with 1M 1.6%.
  gen.train = 1000000;
  gen.test = 20000;
  gen.values_per_field = 200;
  gen.seed = 3;
  auto planted = generate_click_logs(gen, dir.file("train.tsv"),
                                     dir.file("test.tsv"));
  BOOST_REQUIRE_MESSAGE(planted, why(planted));
  auto train = load_click_log(dir.file("train.tsv"), gen.schema);
  auto test = load_click_log(dir.file("test.tsv"), gen.schema);
  BOOST_REQUIRE(train);
  BOOST_REQUIRE(test);

  auto be = make_cpu_backend(1);
  click_model_config cfg;
  cfg.dim = 8;
  cfg.hidden = {32};
  auto m = troupe::click_model::make(gen.schema, cfg, *be);
  BOOST_REQUIRE_MESSAGE(m, why(m));
  auto& model = **m;
  auto before = model.evaluate(*test);
  std::vector<uint32_t> idx;
  for (int epoch = 0; epoch < 3; ++epoch) {
    auto order = epoch_order(static_cast<size_t>(train->count), 1, epoch);
    for (int64_t first = 0; first < train->count; first += cfg.batch_size) {
      int n = static_cast<int>(
        std::min<int64_t>(cfg.batch_size, train->count - first));
      model.train_step(*train, order.data() + first, n);
    }
  }
  auto after = model.evaluate(*test);
  BOOST_TEST_MESSAGE("click model: test log-loss "
                     << after.log_loss << " (planted " << planted->test_log_loss
                     << ", before " << before.log_loss << "), AUC " << after.auc
                     << " (planted " << planted->test_auc << ")");
  BOOST_TEST(after.log_loss < planted->test_log_loss * 1.025);
  BOOST_TEST(after.auc > planted->test_auc - 0.02);
  BOOST_TEST(after.log_loss < before.log_loss - 0.05);
  // Each step pulled and pushed each of its rows once.
  auto& t = model.table();
  BOOST_TEST(t.pushes() == model.steps());
  BOOST_TEST(t.rows_pushed() < t.pushes() * cfg.batch_size * 4);
  // The 4 fields' 200 values each, and no more, became rows.
  BOOST_TEST(t.rows() <= 4u * 200u);
  BOOST_TEST(t.rows() > 4u * 150u);
}

BOOST_AUTO_TEST_SUITE_END()
