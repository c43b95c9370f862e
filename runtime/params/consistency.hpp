// The consistency modes and the staleness rules of a run (cluster_config
// names them as cluster_config::mode and so on): the shard's rules in
// param_block keep them, and the config reader only chooses one.
#pragma once

namespace troupe {

/// How the shards combine the workers' pushes (cluster.consistency; the
/// rules are param_block's).
enum class consistency_mode { async, sync, ssp, easgd };
/// async and ssp: the learning rate of a push that `s` updates of other
/// pushes overtook (its staleness): divide scales it by 1 / max(1, s),
/// the staleness-dependent rate of Zhang et al. (2016); none keeps it.
enum class stale_rate { divide, none };
/// async and ssp: the optimizer's momentum (Adam's beta1, the momentum
/// optimizer's m). n workers pushing in turn add momentum of their own,
/// about 1 - 1/n (Mitliagkas et al., 2016), and their pushes are about n
/// updates stale, so reduce lowers the optimizer's momentum by 1 - 1/s,
/// not below 0, where s is the pushes' recent mean staleness (a moving
/// average over about 32 pushes; s <= 1 keeps it). none (the default)
/// keeps it. docs/benchmarks.md's scaling section has the measured effect.
enum class stale_momentum_rule { reduce, none };

} // namespace troupe
