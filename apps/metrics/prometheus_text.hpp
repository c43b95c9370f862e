// The Prometheus text exposition format (version 0.0.4) of what the chief
// knows about its run: the same cluster_view the shell's `status` shows,
// plus the serving process's own memory and CPU. One # HELP and # TYPE line
// per family, then its samples; labels name the run, worker, shard, node.
//
// Counters end in _total and only grow within a run (a dashboard takes
// rate() of them: a shard's update rate is rate(troupe_shard_updates_total));
// gauges are values now. What is not known yet (no evaluation, no loss)
// is left out, never given a sentinel.
#pragma once

#include <cstdint>
#include <string>

#include "actors/protocol/shell_protocol.hpp"
#include "runtime/base/process_usage.hpp"

namespace troupe {

/// The exposition of `v`, with `self` as the serving process's usage.
std::string prometheus_text(const cluster_view& v, const process_usage& self);

/// `text` escaped for a label value: backslash, double quote and newline.
std::string prometheus_label_value(const std::string& text);

} // namespace troupe
