#include "runtime/rules/run_schedule.hpp"

#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_SUITE(run_schedule)

BOOST_AUTO_TEST_CASE(evaluations_come_once_per_crossed_interval) {
  troupe::run_schedule s{469, 0, 0, 100}; // per epoch when eval_every is 0
  BOOST_TEST(s.eval_interval() == 469);
  BOOST_TEST(!s.take_eval(468));
  BOOST_TEST(s.take_eval(470)); // a report crossed it
  BOOST_TEST(s.next_eval() == 938);
  BOOST_TEST(!s.take_eval(470)); // taken once
  BOOST_TEST(s.take_eval(2000)); // several at once count once
  BOOST_TEST(s.next_eval() == 2345);
}

BOOST_AUTO_TEST_CASE(checkpoints_only_with_an_interval) {
  troupe::run_schedule none{100, 50, 0, 10};
  BOOST_TEST(!none.take_checkpoint(1000000));
  troupe::run_schedule every{100, 50, 200, 10};
  BOOST_TEST(!every.take_checkpoint(199));
  BOOST_TEST(every.take_checkpoint(205));
  BOOST_TEST(every.next_checkpoint() == 400);
}

BOOST_AUTO_TEST_CASE(a_resumed_run_keeps_the_grid_of_evaluations) {
  troupe::run_schedule s{100, 30, 200, 10};
  s.resume_at(95);
  BOOST_TEST(s.next_eval() == 120);       // the next multiple of 30
  BOOST_TEST(s.next_checkpoint() == 295); // one interval on
  s.resume_at(90);
  BOOST_TEST(s.next_eval() == 120); // strictly after the step
  // A chief that kept 250 steps trained since the checkpoint at 95: the
  // next checkpoint is due at once, the one after on the grid from there.
  s.resume_at(345, 95);
  BOOST_TEST(s.next_checkpoint() == 295);
  BOOST_TEST(s.take_checkpoint(346));
  BOOST_TEST(s.next_checkpoint() == 495);
}

BOOST_AUTO_TEST_CASE(log_lines_name_the_multiple_crossed) {
  troupe::run_schedule s{100, 0, 0, 100};
  BOOST_TEST(s.log_step(92, 99) == 0);
  BOOST_TEST(s.log_step(96, 104) == 100);
  BOOST_TEST(s.log_step(199, 200) == 200);
  BOOST_TEST(s.log_step(200, 207) == 0);
  troupe::run_schedule every_20{100, 0, 0, 20};
  BOOST_TEST(every_20.log_step(18, 26) == 20);
  BOOST_TEST(every_20.log_step(34, 42) == 40);
  BOOST_TEST(every_20.log_step(35, 62) == 60); // two crossed: the last
}

BOOST_AUTO_TEST_SUITE_END()
