// The chief's log kept for the page (apps/launch/log_tail): every byte
// goes through to the process's output, whole lines are kept with their
// time and number, the oldest give way, a long line is cut, and lines
// written at once from several threads stay whole.
#include "apps/metrics/log_tail.hpp"

#include <boost/test/unit_test.hpp>

#include <ostream>
#include <sstream>
#include <thread>
#include <vector>

using namespace troupe;

BOOST_AUTO_TEST_SUITE(log_tail)

BOOST_AUTO_TEST_CASE(lines_go_through_and_are_kept) {
  std::stringstream out;
  troupe::log_tail tail{out.rdbuf(), 3};
  std::ostream log{&tail};
  log << "one\ntwo\n" << std::flush;
  log << "thr" << 'e' << "e\nfour\nfive (unfinished)";
  BOOST_TEST(out.str() == "one\ntwo\nthree\nfour\nfive (unfinished)");
  auto kept = tail.since(0);
  BOOST_REQUIRE_EQUAL(kept.size(), 3u); // the oldest gave way
  BOOST_TEST(kept[0].text == "two");
  BOOST_TEST(kept[0].seq == 2);
  BOOST_TEST(kept[2].text == "four");
  BOOST_TEST(kept[2].seq == 4);
  BOOST_TEST(kept[2].unix_ms >= tail.started_unix_ms());
  BOOST_TEST(tail.since(3).size() == 1u);
  BOOST_TEST(tail.since(4).empty());
  BOOST_TEST(tail.since(0, 1).front().text == "four"); // the newest
}

BOOST_AUTO_TEST_CASE(a_long_line_is_cut_and_nothing_is_written_without_output) {
  troupe::log_tail tail{nullptr};
  std::ostream log{&tail};
  log << std::string(3 * troupe::log_tail::max_line_bytes, 'x') << "\nshort\n";
  auto kept = tail.since(0);
  BOOST_REQUIRE_EQUAL(kept.size(), 2u);
  BOOST_TEST(kept[0].text.size() == troupe::log_tail::max_line_bytes);
  BOOST_TEST(kept[1].text == "short");
}

BOOST_AUTO_TEST_CASE(lines_from_several_threads_stay_whole) {
  std::stringstream out;
  troupe::log_tail tail{out.rdbuf(), 10000};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&tail, t] {
      std::ostream log{&tail};
      for (int i = 0; i < 500; ++i) // one write a line, as the chief's say()
        log << ("thread " + std::to_string(t) + " line " + std::to_string(i)
                + "\n")
            << std::flush;
    });
  for (auto& w : writers)
    w.join();
  auto kept = tail.since(0, 10000);
  BOOST_REQUIRE_EQUAL(kept.size(), 2000u);
  for (auto& l : kept)
    BOOST_TEST(l.text.rfind("thread ", 0) == 0, l.text);
  std::string line;
  size_t lines = 0;
  while (std::getline(out, line)) {
    BOOST_TEST(line.rfind("thread ", 0) == 0, line);
    ++lines;
  }
  BOOST_TEST(lines == 2000u);
}

// A process's log: kept and written through with a metrics port, kept only
// when quiet, written straight through without a port.
BOOST_AUTO_TEST_CASE(a_kept_log_keeps_only_when_asked) {
  std::ostringstream out;
  {
    troupe::kept_log kept{true, &out};
    BOOST_REQUIRE(kept.tail() != nullptr);
    *kept.stream() << "node ps0 joined\n" << std::flush;
    BOOST_TEST(out.str() == "node ps0 joined\n");
    BOOST_REQUIRE_EQUAL(kept.tail()->since(0).size(), 1u);
  }
  {
    troupe::kept_log quiet{true, nullptr};
    *quiet.stream() << "kept only\n" << std::flush;
    BOOST_TEST(quiet.tail()->since(0).at(0).text == "kept only");
    BOOST_TEST(out.str() == "node ps0 joined\n");
  }
  troupe::kept_log plain{false, &out};
  BOOST_TEST(plain.tail() == nullptr);
  BOOST_TEST(plain.stream() == &out);
  troupe::kept_log nowhere{false, nullptr};
  BOOST_TEST(nowhere.stream() == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
