//! The nodes a pod with a `DoNotSchedule` spread keeps named in every domain, so that the
//! scheduler finds cool named nodes in whichever domain is open when it reaches the pod.

use crate::config::PlacementConfig;
use crate::placement::rank::standing::Candidate;

/// Named nodes each open spread domain keeps at least (more under sampling: as many as it takes
/// for one to be in the sample): several, so that the pods that fall back to a domain (their
/// first tier's closed) spread over them by the scheduler's resource scores instead of stacking
/// on one node nobody charged.
pub(in crate::placement) const SPREAD_DOMAIN_NODES: usize = 3;

/// Names, in the last tier, the `per_domain` coolest nodes (of `cool`, the cool nodes the
/// node filters allow) of every domain of the pod's `DoNotSchedule` spread constraints that the
/// tiers do not name enough of: when pods this replica has not heard of (another replica's, decided in the
/// last few milliseconds) close the first tier's domain, the scheduler still finds cool named
/// nodes in whichever domain is open.
pub(in crate::placement) fn cover_spread_domains(
    tiers: &mut Vec<Vec<Candidate>>,
    cool: &[Candidate],
    domains: &[(String, Vec<usize>)],
    policy: &PlacementConfig,
    per_domain: usize,
) {
    if policy.tiers.len() < 2 || tiers.iter().all(Vec::is_empty) {
        return;
    }
    let last = policy.tiers.len() - 1;
    if tiers.len() <= last {
        tiers.resize(last + 1, Vec::new());
    }
    for (_, positions) in domains {
        let in_domain = |index: usize| positions.binary_search(&index).is_ok();
        let named = tiers
            .iter()
            .flatten()
            .filter(|c| in_domain(c.index))
            .count();
        if named >= per_domain {
            continue;
        }
        let mut coolest: Vec<Candidate> = cool
            .iter()
            .filter(|c| in_domain(c.index))
            .filter(|c| !tiers.iter().flatten().any(|n| n.index == c.index))
            .copied()
            .collect();
        coolest.sort_by(Candidate::order);
        tiers[last].extend(coolest.into_iter().take(per_domain - named));
    }
}
