//! A pod's CPU as the scheduler counts it, for the in-flight ledger.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A Kubernetes quantity as a number of cores: "4", "3500m", "1.5", "2k", "1e3", "1Ki".
/// `None` for anything malformed, negative or not finite.
pub(crate) fn parse_cpu_cores(quantity: &str) -> Option<f64> {
    let q = quantity.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0_f64.powi(2),
        "Gi" => 1024.0_f64.powi(3),
        "Ti" => 1024.0_f64.powi(4),
        "Pi" => 1024.0_f64.powi(5),
        "Ei" => 1024.0_f64.powi(6),
        // Decimal exponent form, e.g. "1e3" / "5E-1".
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    let cores = number * scale;
    (cores.is_finite() && cores >= 0.0).then_some(cores)
}

/// CPU cores in a Kubernetes quantity; `None` when unreadable.
pub(crate) fn cpu_cores(quantity: &Quantity) -> Option<f64> {
    parse_cpu_cores(&quantity.0)
}

fn container_cpu(container: &Container) -> Option<f64> {
    let resources = container.resources.as_ref()?;
    let from = |list: Option<&std::collections::BTreeMap<String, Quantity>>| {
        list.and_then(|m| m.get("cpu")).and_then(cpu_cores)
    };
    // Without a request the apiserver defaults it to the limit.
    from(resources.requests.as_ref()).or_else(|| from(resources.limits.as_ref()))
}

/// The pod's effective CPU request: containers summed, or the largest init container if larger.
/// `None` when no container says anything.
pub(crate) fn pod_cpu_cores(pod: &Pod) -> Option<f64> {
    let spec = pod.spec.as_ref()?;
    let regular: Vec<f64> = spec.containers.iter().filter_map(container_cpu).collect();
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .filter_map(container_cpu)
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        });
    let sum = (!regular.is_empty()).then(|| regular.iter().sum::<f64>());
    match (sum, init) {
        (Some(s), Some(i)) => Some(s.max(i)),
        (s, i) => s.or(i),
    }
}

/// The most CPU the pod's containers may use: their limits summed; `None` when any container
/// has no limit (then nothing caps it).
pub(crate) fn pod_cpu_limit_cores(pod: &Pod) -> Option<f64> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .map(|c| {
            c.resources
                .as_ref()?
                .limits
                .as_ref()?
                .get("cpu")
                .and_then(cpu_cores)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities() {
        for (q, want) in [
            ("4", Some(4.0)),
            ("3500m", Some(3.5)),
            ("1.5", Some(1.5)),
            ("250m", Some(0.25)),
            ("2k", Some(2000.0)),
            ("1e3", Some(1000.0)),
            ("5E-1", Some(0.5)),
            ("1Ki", Some(1024.0)),
            ("500000u", Some(0.5)),
            ("", None),
            ("m", None),
            ("-1", None),
            ("4 cores", None),
            ("1.2.3", None),
        ] {
            assert_eq!(parse_cpu_cores(q), want, "{q:?}");
        }
    }

    #[test]
    fn pod_cpu_sums_containers_and_falls_back_to_limits() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {
                "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
                "containers": [
                    {"name": "sidecar", "resources": {"requests": {"cpu": "250m"}}},
                    {"name": "flink-main-container", "resources": {"limits": {"cpu": "2"}}},
                    {"name": "no-resources"}
                ]
            }
        }))
        .expect("pod");
        assert_eq!(pod_cpu_cores(&pod), Some(3.0));
        let small_init: Pod = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}
        }))
        .expect("pod");
        assert_eq!(pod_cpu_cores(&small_init), Some(2.0));
        assert_eq!(pod_cpu_cores(&Pod::default()), None);
    }
}
