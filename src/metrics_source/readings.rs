//! Pure part of the Prometheus source: query results → per-node readings → [`LoadSnapshot`].
//!
//! Nothing here does I/O, so the conversion is unit-tested and fuzzed on raw response bytes.

use std::collections::BTreeMap;

use crate::hashing::HashMap;
use std::time::SystemTime;

use prometheus_http_query::response::Data;
use serde::Deserialize;

use crate::config::prometheus::NodeMapping;
use crate::snapshot::{LoadSnapshot, NodeLoad, PodReading};

/// One series of an instant vector: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub(crate) labels: HashMap<String, String>,
    pub(crate) value: f64,
}

/// What a query's response body can be besides a vector.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResponseError {
    #[error("Prometheus answered an error: {0}")]
    Prometheus(String),
    #[error("response is not a Prometheus API answer: {0}")]
    Garbage(String),
    #[error("query returned a {0}, not an instant vector")]
    NotAVector(&'static str),
}

#[derive(Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
enum Envelope {
    Success {
        data: Data,
    },
    Error {
        #[serde(default, rename = "errorType")]
        error_type: String,
        #[serde(default)]
        error: String,
    },
}

/// Reads one `/api/v1/query` response body as an instant vector.
pub fn parse_vector(body: &[u8]) -> Result<Vec<Series>, ResponseError> {
    let envelope: Envelope =
        serde_json::from_slice(body).map_err(|e| ResponseError::Garbage(e.to_string()))?;
    let data = match envelope {
        Envelope::Success { data } => data,
        Envelope::Error { error_type, error } => {
            return Err(ResponseError::Prometheus(format!("{error_type}: {error}")));
        }
    };
    match data {
        Data::Vector(v) => Ok(v
            .into_iter()
            .map(|s| {
                let (labels, sample) = s.into_inner();
                Series {
                    labels: labels.into_iter().collect(),
                    value: sample.value(),
                }
            })
            .collect()),
        Data::Matrix(_) => Err(ResponseError::NotAVector("range vector")),
        Data::Scalar(_) => Err(ResponseError::NotAVector("scalar")),
    }
}

/// The results of one refresh. `None`: the optional query was not configured or failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
    pub cpu: Vec<Series>,
    pub network: Vec<Series>,
    pub cpu_cores: Option<Vec<Series>>,
    pub network_capacity: Option<Vec<Series>>,
    pub memory: Option<Vec<Series>>,
    /// `node_uname_info` series, for [`NodeMapping::Uname`].
    pub uname: Option<Vec<Series>>,
    /// CPU cores and network bytes per second of running pods, by `namespace` and `pod`.
    pub pod_cpu: Option<Vec<Series>>,
    pub pod_network: Option<Vec<Series>>,
    /// Samples each node's exporter series holds over the rate window.
    pub node_samples: Option<Vec<Series>>,
}

/// Why a refresh produced no snapshot.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("the {0} mapping needs node_uname_info series and got none")]
    NoUnameInfo(&'static str),
    #[error("the internal_ip mapping needs the node inventory (kube API), which is not available")]
    NoInventory,
    #[error(
        "no node has both a CPU and a network reading ({cpu} CPU series, {network} network series, {unmapped} series not mapped to a node)"
    )]
    NoNodes {
        cpu: usize,
        network: usize,
        unmapped: usize,
    },
}

/// What was left out while building a snapshot; logged when it changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildReport {
    /// Series whose labels named no node.
    pub(crate) unmapped_series: usize,
    /// NaN or infinite values, ignored.
    pub(crate) non_finite_values: usize,
    /// Nodes with a CPU reading but no network reading, or the reverse: left out.
    pub incomplete_nodes: Vec<String>,
}

/// Joins the readings per node. A node enters the snapshot only with both a CPU and a network
/// reading: a node missing from the metrics must never look cool.
pub fn build_snapshot(
    readings: &Readings,
    mapping: &NodeMapping,
    node_by_ip: Option<&HashMap<String, String>>,
    taken_at: SystemTime,
) -> Result<(LoadSnapshot, BuildReport), BuildError> {
    let mapper = Mapper::new(readings, mapping, node_by_ip)?;
    let mut report = BuildReport::default();
    let mut per_node = |series: &[Series]| {
        mapper.per_node(
            series,
            &mut report.unmapped_series,
            &mut report.non_finite_values,
        )
    };

    let cpu = per_node(&readings.cpu);
    let network = per_node(&readings.network);
    let cores = readings
        .cpu_cores
        .as_deref()
        .map(&mut per_node)
        .unwrap_or_default();
    let capacity = readings
        .network_capacity
        .as_deref()
        .map(&mut per_node)
        .unwrap_or_default();
    let memory = readings
        .memory
        .as_deref()
        .map(&mut per_node)
        .unwrap_or_default();

    let mut nodes = Vec::with_capacity(cpu.len());
    for (name, &busy) in &cpu {
        let Some(&bytes) = network.get(name) else {
            report.incomplete_nodes.push(name.clone());
            continue;
        };
        let mut node = NodeLoad::new(name.clone(), busy.clamp(0.0, 1.0));
        node.network_bytes_per_second = Some(bytes.max(0.0));
        node.network_capacity_bytes_per_second = capacity.get(name).copied().filter(|c| *c > 0.0);
        node.cpu_capacity_cores = cores.get(name).copied().filter(|c| *c > 0.0);
        node.memory = memory.get(name).map(|m| m.clamp(0.0, 1.0));
        nodes.push(node);
    }
    report.incomplete_nodes.extend(
        network
            .keys()
            .filter(|name| !cpu.contains_key(*name))
            .cloned(),
    );
    report.incomplete_nodes.sort();
    if nodes.is_empty() {
        return Err(BuildError::NoNodes {
            cpu: readings.cpu.len(),
            network: readings.network.len(),
            unmapped: report.unmapped_series,
        });
    }
    let window_samples = readings
        .node_samples
        .as_deref()
        .map(&mut per_node)
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, n)| *n >= 1.0)
        .collect();
    let snapshot = LoadSnapshot {
        taken_at: Some(taken_at),
        nodes,
        pods: pod_readings(readings, &mut report.non_finite_values),
        window_samples,
    };
    Ok((snapshot, report))
}

/// One reading per pod that has a finite, non-negative CPU value; its network when there is
/// one. Jobs are not known here: the pod watch adds them (`cluster::running`).
fn pod_readings(readings: &Readings, non_finite: &mut usize) -> Vec<PodReading> {
    let key = |s: &Series| -> Option<(String, String)> {
        let namespace = s.labels.get("namespace").filter(|n| !n.is_empty())?;
        let pod = s.labels.get("pod").filter(|p| !p.is_empty())?;
        Some((namespace.clone(), pod.clone()))
    };
    let mut finite = |s: &Series| {
        let ok = s.value.is_finite() && s.value >= 0.0;
        if !ok {
            *non_finite += 1;
        }
        ok
    };
    let mut network: HashMap<(String, String), f64> = HashMap::default();
    for s in readings.pod_network.iter().flatten() {
        if let Some(k) = key(s).filter(|_| finite(s)) {
            *network.entry(k).or_default() += s.value;
        }
    }
    let mut cpu: BTreeMap<(String, String), f64> = BTreeMap::new();
    for s in readings.pod_cpu.iter().flatten() {
        if let Some(k) = key(s).filter(|_| finite(s)) {
            *cpu.entry(k).or_default() += s.value;
        }
    }
    cpu.into_iter()
        .map(|((namespace, pod), cpu_cores)| PodReading {
            network_bytes_per_second: network.get(&(namespace.clone(), pod.clone())).copied(),
            namespace,
            pod,
            cpu_cores,
            labels: BTreeMap::new(),
            owner: None,
            running_secs: None,
            node: None,
            steered: false,
        })
        .collect()
}

/// Series labels → node name, for one refresh.
enum Mapper<'a> {
    Label(&'a str),
    /// instance → node name
    Instance(HashMap<String, String>),
    /// instance host (InternalIP) → node name
    Host(&'a HashMap<String, String>),
}

impl<'a> Mapper<'a> {
    fn new(
        readings: &Readings,
        mapping: &'a NodeMapping,
        node_by_ip: Option<&'a HashMap<String, String>>,
    ) -> Result<Self, BuildError> {
        Ok(match mapping {
            NodeMapping::Label { name } => Mapper::Label(name),
            NodeMapping::Uname => {
                let by_instance: HashMap<String, String> = readings
                    .uname
                    .iter()
                    .flatten()
                    .filter_map(|s| {
                        let instance = s.labels.get("instance")?;
                        let node = s.labels.get("nodename").filter(|n| !n.is_empty())?;
                        Some((instance.clone(), node.clone()))
                    })
                    .collect();
                if by_instance.is_empty() {
                    return Err(BuildError::NoUnameInfo("uname"));
                }
                Mapper::Instance(by_instance)
            }
            NodeMapping::InternalIp => Mapper::Host(node_by_ip.ok_or(BuildError::NoInventory)?),
        })
    }

    fn node<'s>(&'s self, labels: &'s HashMap<String, String>) -> Option<&'s str> {
        let name = match self {
            Mapper::Label(label) => host_of(labels.get(*label)?),
            Mapper::Instance(map) => map.get(labels.get("instance")?)?,
            Mapper::Host(map) => map.get(host_of(labels.get("instance")?))?,
        };
        (!name.is_empty()).then_some(name)
    }

    /// One value per node; several series on one node keep the highest (the hotter reading).
    fn per_node(
        &self,
        series: &[Series],
        unmapped: &mut usize,
        non_finite: &mut usize,
    ) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for s in series {
            let Some(node) = self.node(&s.labels) else {
                *unmapped += 1;
                continue;
            };
            if !s.value.is_finite() {
                *non_finite += 1;
                continue;
            }
            out.entry(node.to_string())
                .and_modify(|v: &mut f64| *v = v.max(s.value))
                .or_insert(s.value);
        }
        out
    }
}

/// `10.0.0.1:9100` → `10.0.0.1`, `[fd00::1]:9100` → `fd00::1`, `node-1` → `node-1`.
/// Node names never contain `:`, so dropping a port suffix is safe.
pub(crate) fn host_of(instance: &str) -> &str {
    if let Some(rest) = instance.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match instance.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => instance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(labels: &[(&str, &str)], value: f64) -> Series {
        Series {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        }
    }

    fn by_node(pairs: &[(&str, f64)]) -> Vec<Series> {
        pairs
            .iter()
            .map(|(n, v)| series(&[("node", n)], *v))
            .collect()
    }

    fn label_mapping() -> NodeMapping {
        NodeMapping::Label {
            name: "node".into(),
        }
    }

    #[test]
    fn hosts_lose_their_port_only() {
        assert_eq!(host_of("10.0.0.1:9100"), "10.0.0.1");
        assert_eq!(host_of("[fd00::1]:9100"), "fd00::1");
        assert_eq!(host_of("node-1"), "node-1");
        assert_eq!(host_of("fd00::1"), "fd00::1");
        assert_eq!(host_of("node-1:http"), "node-1:http");
    }

    #[test]
    fn parses_vectors_and_rejects_the_rest() {
        let ok = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"node":"a"},"value":[1700000000.1,"0.25"]},
            {"metric":{"node":"b"},"value":[1700000000.1,"NaN"]}]}}"#;
        let v = parse_vector(ok).expect("vector");
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].value, 0.25);
        assert!(v[1].value.is_nan());
        let err = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert!(
            matches!(parse_vector(err), Err(ResponseError::Prometheus(m)) if m.contains("parse error"))
        );
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#;
        assert_eq!(
            parse_vector(scalar),
            Err(ResponseError::NotAVector("scalar"))
        );
        for garbage in [&b"<html>"[..], b"", b"{}", b"{\"status\":\"success\"}"] {
            assert!(matches!(
                parse_vector(garbage),
                Err(ResponseError::Garbage(_))
            ));
        }
    }

    #[test]
    fn nodes_need_cpu_and_network_and_bad_values_are_dropped() {
        let readings = Readings {
            cpu: by_node(&[("a", 0.2), ("b", f64::NAN), ("c", 1.3), ("d", 0.5)]),
            network: by_node(&[("a", 100.0), ("b", 5.0), ("c", -1.0), ("e", 7.0)]),
            memory: Some(by_node(&[("a", 0.4)])),
            cpu_cores: Some(by_node(&[("a", 8.0), ("c", 0.0)])),
            network_capacity: Some(by_node(&[("a", f64::INFINITY)])),
            uname: None,
            pod_cpu: None,
            pod_network: None,
            node_samples: Some(by_node(&[("a", 3.0), ("c", f64::NAN), ("d", 0.0)])),
        };
        let (snap, report) =
            build_snapshot(&readings, &label_mapping(), None, SystemTime::UNIX_EPOCH).expect("ok");
        let samples: Vec<_> = snap.window_samples.iter().collect();
        assert_eq!(samples, [(&"a".to_string(), &3.0)]);
        let names: Vec<_> = snap.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        let a = &snap.nodes[0];
        assert_eq!(
            (a.cpu, a.network_bytes_per_second, a.memory),
            (0.2, Some(100.0), Some(0.4))
        );
        assert_eq!(a.cpu_capacity_cores, Some(8.0));
        assert_eq!(a.network_capacity_bytes_per_second, None);
        let c = &snap.nodes[1];
        assert_eq!((c.cpu, c.network_bytes_per_second), (1.0, Some(0.0)));
        assert_eq!(c.cpu_capacity_cores, None);
        assert_eq!(report.non_finite_values, 3);
        assert_eq!(report.incomplete_nodes, ["b", "d", "e"]);
        snap.validate().expect("snapshot is valid");
    }

    fn by_pod(values: &[(&str, &str, f64)]) -> Vec<Series> {
        values
            .iter()
            .map(|(namespace, pod, v)| Series {
                labels: [("namespace", *namespace), ("pod", *pod)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                value: *v,
            })
            .collect()
    }

    #[test]
    fn pod_readings_keep_finite_cpu_and_join_network() {
        let readings = Readings {
            cpu: by_node(&[("a", 0.2)]),
            network: by_node(&[("a", 100.0)]),
            pod_cpu: Some(by_pod(&[
                ("flink", "tm-1", 0.6),
                ("flink", "tm-2", f64::NAN),
                ("flink", "tm-3", 1.5),
                ("", "tm-4", 1.0),
            ])),
            pod_network: Some(by_pod(&[("flink", "tm-1", 5e7), ("flink", "tm-2", 1.0)])),
            ..Readings::default()
        };
        let (snap, report) =
            build_snapshot(&readings, &label_mapping(), None, SystemTime::UNIX_EPOCH).expect("ok");
        let pods: Vec<_> = snap
            .pods
            .iter()
            .map(|p| (p.pod.as_str(), p.cpu_cores, p.network_bytes_per_second))
            .collect();
        assert_eq!(pods, [("tm-1", 0.6, Some(5e7)), ("tm-3", 1.5, None)]);
        assert_eq!(report.non_finite_values, 1);
        snap.validate().expect("snapshot is valid");
    }

    #[test]
    fn uname_join_maps_instances_to_node_names() {
        let uname = vec![
            series(
                &[("instance", "10.0.0.1:9100"), ("nodename", "worker-1")],
                1.0,
            ),
            series(
                &[("instance", "10.0.0.2:9100"), ("nodename", "worker-2")],
                1.0,
            ),
        ];
        let at = |i: &str, v| series(&[("instance", i)], v);
        let readings = Readings {
            cpu: vec![
                at("10.0.0.1:9100", 0.1),
                at("10.0.0.2:9100", 0.9),
                at("10.0.0.3:9100", 0.5),
            ],
            network: vec![at("10.0.0.1:9100", 1.0), at("10.0.0.2:9100", 2.0)],
            uname: Some(uname),
            ..Readings::default()
        };
        let (snap, report) =
            build_snapshot(&readings, &NodeMapping::Uname, None, SystemTime::UNIX_EPOCH)
                .expect("ok");
        let names: Vec<_> = snap.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["worker-1", "worker-2"]);
        assert_eq!(report.unmapped_series, 1);
        let no_uname = Readings {
            uname: Some(Vec::new()),
            ..readings
        };
        assert_eq!(
            build_snapshot(&no_uname, &NodeMapping::Uname, None, SystemTime::UNIX_EPOCH),
            Err(BuildError::NoUnameInfo("uname"))
        );
    }

    #[test]
    fn internal_ip_mapping_uses_the_inventory() {
        let at = |i: &str, v| series(&[("instance", i)], v);
        let readings = Readings {
            cpu: vec![at("10.0.0.1:9100", 0.1), at("[fd00::2]:9100", 0.3)],
            network: vec![at("10.0.0.1:9100", 1.0), at("[fd00::2]:9100", 2.0)],
            ..Readings::default()
        };
        let ips: HashMap<String, String> = HashMap::from_iter([
            ("10.0.0.1".to_string(), "worker-1".to_string()),
            ("fd00::2".to_string(), "worker-2".to_string()),
        ]);
        let (snap, _) = build_snapshot(
            &readings,
            &NodeMapping::InternalIp,
            Some(&ips),
            SystemTime::UNIX_EPOCH,
        )
        .expect("ok");
        assert_eq!(snap.nodes.len(), 2);
        assert_eq!(
            build_snapshot(
                &readings,
                &NodeMapping::InternalIp,
                None,
                SystemTime::UNIX_EPOCH
            ),
            Err(BuildError::NoInventory)
        );
    }

    #[test]
    fn empty_results_are_an_error_not_an_empty_cluster() {
        let err = build_snapshot(
            &Readings::default(),
            &label_mapping(),
            None,
            SystemTime::UNIX_EPOCH,
        )
        .expect_err("no nodes");
        assert!(matches!(err, BuildError::NoNodes { .. }));
    }
}
