//! A pod's CPU as the scheduler counts it, for the in-flight ledger.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// CPU cores in a Kubernetes quantity: "2", "500m", "1.5", "2k". `None` when unreadable.
pub fn cpu_cores(quantity: &Quantity) -> Option<f64> {
    let text = quantity.0.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(number * scale).filter(|v| v.is_finite() && *v >= 0.0)
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
pub fn pod_cpu_cores(pod: &Pod) -> Option<f64> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for (text, want) in [("2", 2.0), ("500m", 0.5), ("1.5", 1.5), ("250000u", 0.25)] {
            assert_eq!(cpu_cores(&Quantity(text.into())), Some(want), "{text}");
        }
        for bad in ["", "abc", "2x", "-1"] {
            assert_eq!(cpu_cores(&Quantity(bad.into())), None, "{bad}");
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
