//! What a new pod will really use: the measured load of its job's running pods when there are
//! enough of them, else its request. Pure.

use crate::config::EstimateConfig;
use crate::inflight::ledger::PodLoad;
use crate::placement::LoadSource;
use crate::view::SiblingLoad;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Estimate {
    pub(crate) load: PodLoad,
    pub(crate) source: LoadSource,
}

/// The load to charge for a new pod whose request-based estimate is `request`, whose CPU
/// limit is `cpu_limit` (`None`: unlimited), given its job's running `siblings`.
///
/// Siblings count when their CPU reading is a real number and they have run for
/// `min_running` (or for an unknown time). With fewer than `min_siblings` of them the request
/// stands: never zero, never a guess from too little. The CPU estimate is kept between
/// `min_cpu_cores` and the limit; network uses the siblings that report it, else the request's.
pub(crate) fn estimate(
    request: PodLoad,
    cpu_limit: Option<f64>,
    siblings: &[SiblingLoad],
    config: &EstimateConfig,
) -> Estimate {
    let min_running = config.min_running.as_secs_f64();
    let settled: Vec<&SiblingLoad> = siblings
        .iter()
        .filter(|s| s.cpu_cores.is_finite() && s.cpu_cores >= 0.0)
        .filter(|s| s.running_secs.is_none_or(|r| r >= min_running))
        .collect();
    let needed = config.min_siblings.max(1);
    if settled.len() < needed {
        return Estimate {
            load: request,
            source: LoadSource::Request,
        };
    }
    let mut cpu = percentile(settled.iter().map(|s| s.cpu_cores), config.percentile)
        .max(config.min_cpu_cores);
    if let Some(limit) = cpu_limit.filter(|l| l.is_finite() && *l > 0.0) {
        cpu = cpu.min(limit);
    }
    let networks: Vec<f64> = settled
        .iter()
        .filter_map(|s| s.network_bytes_per_second)
        .filter(|n| n.is_finite() && *n >= 0.0)
        .collect();
    let network = if networks.len() >= needed {
        percentile(networks.into_iter(), config.percentile)
    } else {
        request.network_bytes_per_second
    };
    Estimate {
        load: PodLoad {
            cpu_cores: cpu,
            network_bytes_per_second: network,
        },
        source: LoadSource::Siblings(settled.len()),
    }
}

/// The `p` percentile (0..1) of `values`, interpolating between neighbours; 0 when empty.
fn percentile(values: impl Iterator<Item = f64>, p: f64) -> f64 {
    let mut sorted: Vec<f64> = values.collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_by(f64::total_cmp);
    let at = p.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (at - low as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const REQUEST: PodLoad = PodLoad {
        cpu_cores: 2.0,
        network_bytes_per_second: 1e6,
    };

    fn sibling(cpu: f64, net: Option<f64>, running: Option<f64>) -> SiblingLoad {
        SiblingLoad {
            cpu_cores: cpu,
            network_bytes_per_second: net,
            running_secs: running,
        }
    }

    fn config() -> EstimateConfig {
        EstimateConfig {
            min_siblings: 2,
            percentile: 0.5,
            min_cpu_cores: 0.1,
            min_running: Duration::from_secs(180),
        }
    }

    #[test]
    fn median_of_settled_siblings() {
        let s = [
            sibling(0.5, Some(8e7), Some(600.0)),
            sibling(0.7, Some(1.2e8), None),
            sibling(0.6, Some(1e8), Some(400.0)),
            // Just started: its rate reads low, it does not count.
            sibling(0.01, Some(0.0), Some(30.0)),
        ];
        let e = estimate(REQUEST, Some(2.0), &s, &config());
        assert_eq!(e.source, LoadSource::Siblings(3));
        assert!((e.load.cpu_cores - 0.6).abs() < 1e-12, "{e:?}");
        assert!(
            (e.load.network_bytes_per_second - 1e8).abs() < 1e-3,
            "{e:?}"
        );
    }

    #[test]
    fn bounded_by_floor_and_limit() {
        let idle = [sibling(0.0, None, None), sibling(0.01, None, None)];
        let e = estimate(REQUEST, None, &idle, &config());
        assert_eq!(e.load.cpu_cores, 0.1);
        assert_eq!(
            e.load.network_bytes_per_second, 1e6,
            "no network readings: the request's"
        );
        let busy = [sibling(3.5, None, None), sibling(4.5, None, None)];
        assert_eq!(
            estimate(REQUEST, Some(3.0), &busy, &config())
                .load
                .cpu_cores,
            3.0
        );
        assert_eq!(
            estimate(REQUEST, None, &busy, &config()).load.cpu_cores,
            4.0
        );
    }

    #[test]
    fn too_few_or_unreadable_siblings_fall_back_to_the_request() {
        for siblings in [
            vec![],
            vec![sibling(0.5, None, None)],
            vec![sibling(f64::NAN, None, None), sibling(0.5, None, None)],
            vec![
                sibling(0.5, None, Some(10.0)),
                sibling(0.5, None, Some(20.0)),
            ],
            vec![
                sibling(-1.0, None, None),
                sibling(f64::INFINITY, None, None),
            ],
        ] {
            let e = estimate(REQUEST, None, &siblings, &config());
            assert_eq!(
                e,
                Estimate {
                    load: REQUEST,
                    source: LoadSource::Request
                },
                "{siblings:?}"
            );
        }
    }

    #[test]
    fn percentile_interpolates() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(percentile(v.into_iter(), 0.0), 1.0);
        assert_eq!(percentile(v.into_iter(), 1.0), 4.0);
        assert_eq!(percentile(v.into_iter(), 0.5), 2.5);
        assert_eq!(percentile([7.0].into_iter(), 0.9), 7.0);
    }
}
