//! The weight of each named node's term: its tier's, graded by heat when the scheduler samples.

use crate::config::PlacementConfig;
use crate::placement::rank::standing::Candidate;

/// What grading reads from the decision: whether the scheduler samples, how far the near-ties
/// of the best reach, and one pod's worth of heat.
pub(in crate::placement) struct Grading {
    pub(crate) sampled: bool,
    pub(crate) tie_limit: Option<f64>,
    /// What this pod adds to the best node's bottleneck.
    pub(crate) pod_adds: f64,
}

/// Each chosen node's weight, tier by tier (`tiers` as `policy.tiers` lists them): its tier's,
/// graded under sampling (see [`graded_weights`]).
pub(in crate::placement) fn tier_weights(
    policy: &PlacementConfig,
    tiers: &[Vec<Candidate>],
    grading: &Grading,
) -> Vec<Vec<i32>> {
    policy
        .tiers
        .iter()
        .zip(tiers)
        .enumerate()
        .map(|(k, (tier, chosen))| {
            if grading.sampled {
                let next = policy.tiers.get(k + 1).map_or(0, |t| t.weight);
                graded_weights(chosen, (tier.weight, next), grading)
            } else {
                vec![tier.weight; chosen.len()]
            }
        })
        .collect()
}

/// How far below its tier's weight a node is weighted for each pod's worth of heat it has over
/// the tier's best, per 100 of the tier's weight (see [`graded_weights`]).
const WEIGHT_PER_POD_OF_HEAT: f64 = 10.0;

/// Each node's weight in a tier when the scheduler samples. Tier 1 then names many nodes, of
/// which the sample holds a few; weighed equally, the request scores alone would choose among
/// those, whatever their heat; so would they among a later tier's nodes for a pod whose sample
/// holds no tier-1 node with room. Graded, a node loses [`WEIGHT_PER_POD_OF_HEAT`] per 100 of
/// the tier's weight (`top`) for each pod's worth of heat (`pod_adds`) it is ranked above the
/// tier's best or the near-ties of the best (`tie_limit`), whichever is higher,: NodeAffinity
/// normalises to the heaviest node in the sample, so that is 20 of its points per pod's worth
/// wherever the tier's best is the heaviest, and the coolest in the sample wins unless its
/// request scores trail by more. Near-ties keep the full weight: replicas take them in their
/// own orders, and the scheduler's scores spread pods over them. No node falls below halfway
/// to the next tier's weight (`next`).
fn graded_weights(tier: &[Candidate], (top, next): (i32, i32), grading: &Grading) -> Vec<i32> {
    let Grading {
        tie_limit,
        pod_adds,
        ..
    } = *grading;
    let floor = (top + next + 1) / 2;
    let Some(best) = tier
        .iter()
        .min_by(|a, b| a.heat.rank.total_cmp(&b.heat.rank))
    else {
        return Vec::new();
    };
    let base = tie_limit.map_or(best.heat.rank, |t| t.max(best.heat.rank));
    let per_pod = WEIGHT_PER_POD_OF_HEAT * f64::from(top) / 100.0;
    tier.iter()
        .map(|c| {
            if c.heat.nic_over != best.heat.nic_over {
                return floor;
            }
            if pod_adds <= 0.0 {
                return top;
            }
            let pods = (c.heat.rank - base).max(0.0) / pod_adds;
            let below = (pods * per_pod).round().min(f64::from(top));
            (top - below as i32).max(floor)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::rank::standing::PodHeat;
    use crate::view::heat::Dimension;

    fn ranked(rank: f64, nic_over: bool) -> Candidate {
        Candidate {
            index: 0,
            heat: PodHeat {
                bottleneck: rank,
                by: Dimension::Cpu,
                sum: rank,
                nic_over,
                rank,
                quiet_nic: 0.0,
            },
            tie: 0,
        }
    }

    /// A pod adds 0.1; near-ties reach 0.35. Each pod's worth above them costs 10 weight,
    /// down to 60 (halfway to 20); a node past its NIC's threshold gets 60 whatever its rank.
    /// A later tier (20, none after it) is graded from its own best, 2 per pod's worth, down
    /// to 10.
    #[test]
    fn tier_weights_fall_with_heat_above_the_near_ties() {
        let tier = [
            ranked(0.30, false),
            ranked(0.35, false),
            ranked(0.40, false),
            ranked(0.55, false),
            ranked(0.95, false),
            ranked(0.31, true),
        ];
        let grading = |tie_limit, pod_adds| Grading {
            sampled: true,
            tie_limit: Some(tie_limit),
            pod_adds,
        };
        let weights = graded_weights(&tier, (100, 20), &grading(0.35, 0.1));
        assert_eq!(weights, [100, 100, 95, 80, 60, 60]);
        // Nothing added: every node as good as the best.
        assert_eq!(
            graded_weights(&tier[..3], (100, 20), &grading(0.3, 0.0)),
            [100, 100, 100]
        );
        let later = [
            ranked(0.60, false),
            ranked(0.65, false),
            ranked(0.80, false),
            ranked(1.20, false),
        ];
        assert_eq!(
            graded_weights(&later, (20, 0), &grading(0.35, 0.1)),
            [20, 19, 16, 10]
        );
    }
}
