// The consistency modes and the staleness rules of a run (cluster_config
// names them as cluster_config::mode and so on): the shard's rules in
// param_block keep them, and the config reader only chooses one.
#pragma once

#include <cmath>
#include <cstdint>

namespace troupe {

/// How the shards combine the workers' pushes (cluster.consistency; the
/// rules are param_block's).
enum class consistency_mode { async, sync, ssp, easgd };
/// async and ssp: the learning rate of a push that `s` updates of other
/// pushes overtook (its staleness): divide scales it by 1 / max(1, s),
/// the staleness-dependent rate of Zhang et al. (2016); gap scales each
/// coordinate's step by how far that coordinate moved since the push's
/// values, in steps (Barkai et al., 2020; stale_compensation.hpp); none
/// keeps it.
enum class stale_rate { divide, none, gap };
/// async and ssp: the optimizer's momentum (Adam's beta1, the momentum
/// optimizer's m). n workers pushing in turn add momentum of their own,
/// about 1 - 1/n (Mitliagkas et al., 2016), and their pushes are about n
/// updates stale, so reduce lowers the optimizer's momentum by 1 - 1/s,
/// not below 0, where s is the pushes' recent mean staleness (a moving
/// average over about 32 pushes; s <= 1 keeps it). none (the default)
/// keeps it. docs/benchmarks.md's scaling section has the measured effect.
enum class stale_momentum_rule { reduce, none };
/// sync: the learning rate of an update that averages k pushes (a batch k
/// times the worker's), so that the rate given for one worker holds for
/// many: sqrt scales it by sqrt(k), the square-root rule for Adam
/// (Malladi et al., 2022), and the config's default for every optimizer
/// since it never steps further than k steps of one worker would; linear
/// by k, the linear rule of Goyal et al. (2017), with the warm-up they
/// pair it with in param_block::options::sync_warmup (with Adam it kept
/// 16 workers within a point, with SGD it diverged at 16:
/// docs/benchmarks.md); none keeps it, as TF's SyncReplicasOptimizer
/// does.
enum class sync_rate { sqrt, linear, none };

/// sync: the factor `rule` puts on the rate of an update of `k` pushes,
/// the update after `version` (reached over the first `warmup` updates,
/// from 1): what the shards apply, and what the status reports.
inline double sync_rate_scale(sync_rate rule, double k, int64_t version,
                              int64_t warmup) {
  double scale = rule == sync_rate::sqrt     ? std::sqrt(k)
                 : rule == sync_rate::linear ? k
                                             : 1.0;
  if (warmup > 0 && version < warmup)
    scale = 1.0
            + (scale - 1.0) * static_cast<double>(version + 1)
                / static_cast<double>(warmup);
  return scale;
}

} // namespace troupe
