// Replays the front door's fuzz corpora (tests/fuzz/corpus/key_handshake/
// and basp_check/: the seeds and the reproducers of fixed findings)
// through the code the libFuzzer targets use
// (tests/fuzz/front_door_inputs.cpp), in this gcc build without libFuzzer:
// no input may crash or break a promise the targets check, a refusal is one
// line, and each corpus holds inputs that get through as well as ones that
// are refused. The seeds whose names say what they are also do it (the
// seed script computes the handshake's HMACs itself, so this also checks
// it against key_exchange).
//
// TROUPE_FRONT_DOOR_CORPUS=<dir> replays <dir>/<target>/ (or
// <dir>/<target>/corpus/, the layout of a scripts/fuzz.sh run) instead,
// e.g. the corpus a fuzzing run grew.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "corpus_files.hpp"
#include "fuzz/front_door_inputs.hpp"

namespace fs = std::filesystem;
using namespace troupe::fuzz;
using namespace troupe::test;

namespace {

using run_fn = front_door_outcome (*)(const uint8_t*, size_t);

const char* const corpus_env = "TROUPE_FRONT_DOOR_CORPUS";

bool replaying_seeds() {
  return !corpus_from_env(corpus_env);
}

/// Runs every file of `target`'s corpus; the outcomes by file name.
std::map<std::string, front_door_outcome> replay(const std::string& target,
                                                 run_fn run) {
  auto dir = corpus_dir(target, corpus_env);
  auto files = corpus_files(dir);
  BOOST_REQUIRE_MESSAGE(!files.empty(), dir << " holds no inputs");
  std::map<std::string, front_door_outcome> out;
  size_t admitted = 0;
  for (auto& f : files) {
    auto bytes = file_bytes(f);
    auto o = run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    BOOST_TEST(o.broken.empty(), f.filename() << ": " << o.broken);
    BOOST_TEST(o.refused.find('\n') == std::string::npos,
               f.filename() << ": a refusal of several lines: " << o.refused);
    admitted += o.admitted ? 1 : 0;
    out[f.filename().string()] = o;
  }
  BOOST_TEST_MESSAGE(target << ": " << files.size() << " inputs from " << dir
                            << ", " << admitted << " admitted");
  // Both outcomes are replayed: each corpus holds valid exchanges too.
  BOOST_TEST(admitted > 0u);
  BOOST_TEST(admitted < files.size());
  return out;
}

/// The seed `name` was admitted (want == ""), or refused with a text that
/// holds `want`.
void expect(const std::map<std::string, front_door_outcome>& outcomes,
            const std::string& name, const std::string& want) {
  auto it = outcomes.find(name);
  BOOST_TEST_REQUIRE((it != outcomes.end()), "no seed " << name);
  auto& o = it->second;
  if (want.empty()) {
    BOOST_TEST(o.admitted, name << " was refused: " << o.refused);
  } else {
    BOOST_TEST(!o.admitted, name << " was admitted");
    BOOST_TEST(o.refused.find(want) != std::string::npos,
               name << ": \"" << o.refused << "\" (wanted: " << want << ")");
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(fuzz_corpus)

BOOST_AUTO_TEST_CASE(key_handshake_inputs) {
  auto outcomes = replay("key_handshake", run_key_handshake);
  if (!replaying_seeds())
    return;
  expect(outcomes, "client_true_answer", "");
  expect(outcomes, "client_true_answer_and_more", "");
  expect(outcomes, "client_other_key", "another cluster key");
  expect(outcomes, "client_answer_for_another_nonce", "does not prove");
  expect(outcomes, "client_plaintext_basp", "plaintext CAF");
  expect(outcomes, "server_tls_client_hello", "TLS client");
  expect(outcomes, "server_plaintext_basp", "plaintext CAF (BASP)");
  expect(outcomes, "server_replayed_proof", "wrong key proof");
  expect(outcomes, "server_other_key", "another cluster key");
  expect(outcomes, "relay_unchanged", "");
  expect(outcomes, "relay_unchanged_bytewise", "");
  expect(outcomes, "relay_unchanged_pieces", "");
  expect(outcomes, "relay_client_key_id", "");
  expect(outcomes, "relay_magic", "sent no key handshake");
  expect(outcomes, "relay_client_nonce", "does not prove");
  expect(outcomes, "relay_answer_key_id", "another cluster key");
  expect(outcomes, "relay_answer_mac", "does not prove");
  expect(outcomes, "relay_proof", "wrong key proof");
}

BOOST_AUTO_TEST_CASE(basp_check_inputs) {
  auto outcomes = replay("basp_check", run_basp_check);
  if (!replaying_seeds())
    return;
  expect(outcomes, "good_client_bytewise", "");
  expect(outcomes, "good_client_chunks", "");
  expect(outcomes, "good_server_chunks", "");
  expect(outcomes, "good_client_partial_payload", "");
  expect(outcomes, "payload_2mib_default_bound", "");
  expect(outcomes, "caf_crash_header", "fields do not fit");
  expect(outcomes, "caf_crash_header_connected", "fields do not fit");
  expect(outcomes, "payload_4gib", "over the bound");
  expect(outcomes, "payload_2mib_small_bound", "over the bound of 1048576");
  expect(outcomes, "second_server_handshake", "server handshake only");
  expect(outcomes, "heartbeat_first", "first message must be");
  expect(outcomes, "message_without_receiver", "BASP header 4");
  expect(outcomes, "tls_client_hello", "is not BASP's");
  expect(outcomes, "key_hello", "is not BASP's");
}

BOOST_AUTO_TEST_SUITE_END()
