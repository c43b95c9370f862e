#!/usr/bin/env bash
# The soak (tests/soak/soak_test.py) at full length: one cluster of eight
# troupe-node processes, each in a network namespace of its own (as root;
# otherwise on 127.0.0.1 without link cuts), trains while workers, shard
# nodes and the chief are killed with kill -9 and links are cut, one after
# another, for MINUTES; then no step may be lost, every shard must end at
# the run's step count, every sample must train once per epoch, every
# process must exit 0, and the heap in use of the processes that lived
# through it (the median of five minutes' medians, as their agents report
# it) must stay at most 10% above its value in the first such window after
# the first 5 minutes at as many shards and replicas (a leak only climbs),
# their resident memory within 10% of its first window's either way (a
# minute's median spreads by up to 15% with what the allocator keeps after
# a free; five minutes' do not: docs/benchmarks.md "The soak").
# ctest runs a 150 s version (soak.short).
# Usage: scripts/soak.sh [minutes, default 60] [seed, default the time]
#          [more options of tests/soak/soak_test.py, e.g. --keep FOLDER to
#          keep the logs and memory.csv]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
minutes="${1:-60}"
seed="${2:-}"
shift $(($# < 2 ? $# : 2))
TROUPE_BUILD_DIR="$TROUPE_BUILD" /usr/bin/python3 tests/soak/soak_test.py \
  --seconds "$((minutes * 60))" --rss-after-s 300 --heap-tolerance 0.10 \
  --rss-tolerance 0.10 \
  --least 60 \
  ${seed:+--seed "$seed"} "$@"
