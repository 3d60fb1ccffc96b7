//! The decision annotation: one line saying what was decided, read back by every replica.
//!
//! `id=3f2a9c01b7de mode=affinity cpu=2 net=0 est=request nodes=node-07:0.62,node-03:0.38 avoid=3 age=4s`
//! `nodes` are where the pod is predicted to land, with probabilities; they and `cpu`/`net`
//! (the charged load; `est` says whether it is the request or `siblings:N`, the measured load
//! of N running pods of its job) let any replica that watches pods rebuild the in-flight
//! ledger entry of a pod another replica steered.
//!
//! In observe mode (`mode=observe`) `nodes` are where the scheduler is predicted to put the pod
//! on its own, and `would=node-02:0.41` names the node the webhook would have put first, with
//! the utilisation the pod would have left there. Readers ignore keys they do not know, so a
//! replica of an older version still reads the rest.

use std::fmt;

use super::ledger::PodLoad;

pub const ANNOTATION: &str = "placement-webhook.io/decision";

#[derive(Debug, Clone, PartialEq)]
pub struct DecisionNote {
    /// Ledger key: unique per steered pod (taken from the admission request uid).
    pub id: String,
    pub mode: String,
    pub load: PodLoad,
    /// Where `load` came from: `request`, or `siblings:N` running pods of the same job.
    pub estimate: String,
    /// First-tier nodes and their heat.
    pub nodes: Vec<(String, f64)>,
    /// Hot nodes named in the avoid term.
    pub avoided: usize,
    pub snapshot_age_secs: u64,
    /// Observe mode: the webhook's first choice, and the utilisation the pod would leave there.
    pub would: Option<(String, f64)>,
}

impl fmt::Display for DecisionNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "id={} mode={} cpu={} net={} est={} nodes=",
            self.id,
            self.mode,
            trim_float(self.load.cpu_cores),
            trim_float(self.load.network_bytes_per_second),
            self.estimate
        )?;
        for (i, (node, heat)) in self.nodes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{node}:{heat:.2}")?;
        }
        write!(f, " avoid={} age={}s", self.avoided, self.snapshot_age_secs)?;
        if let Some((node, heat)) = &self.would {
            write!(f, " would={node}:{heat:.2}")?;
        }
        Ok(())
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl DecisionNote {
    /// Reads an annotation written by `Display`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut note = DecisionNote {
            id: String::new(),
            mode: String::new(),
            load: PodLoad::default(),
            estimate: String::new(),
            nodes: Vec::new(),
            avoided: 0,
            snapshot_age_secs: 0,
            would: None,
        };
        for field in text.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            match key {
                "id" => note.id = value.to_string(),
                "mode" => note.mode = value.to_string(),
                "cpu" => note.load.cpu_cores = finite(value)?,
                "net" => note.load.network_bytes_per_second = finite(value)?,
                "est" => note.estimate = value.to_string(),
                "nodes" => {
                    note.nodes = value
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(|pair| {
                            let (node, heat) = pair.rsplit_once(':')?;
                            Some((node.to_string(), finite(heat)?))
                        })
                        .collect::<Option<_>>()?;
                }
                "avoid" => note.avoided = value.parse().ok()?,
                "age" => note.snapshot_age_secs = value.strip_suffix('s')?.parse().ok()?,
                "would" => {
                    let (node, heat) = value.rsplit_once(':')?;
                    note.would = Some((node.to_string(), finite(heat)?));
                }
                _ => {}
            }
        }
        (!note.id.is_empty()).then_some(note)
    }
}

fn finite(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let note = DecisionNote {
            id: "3f2a9c01b7de".into(),
            mode: "affinity".into(),
            load: PodLoad {
                cpu_cores: 2.5,
                network_bytes_per_second: 0.0,
            },
            estimate: "siblings:4".into(),
            nodes: vec![("node-07".into(), 0.12), ("node-03".into(), 0.15)],
            avoided: 3,
            snapshot_age_secs: 4,
            would: None,
        };
        let text = note.to_string();
        assert_eq!(
            text,
            "id=3f2a9c01b7de mode=affinity cpu=2.5 net=0 est=siblings:4 nodes=node-07:0.12,node-03:0.15 avoid=3 age=4s"
        );
        assert!(!text.contains('\n'));
        assert_eq!(DecisionNote::parse(&text), Some(note));
    }

    #[test]
    fn an_observed_decision_names_the_webhooks_choice() {
        let note = DecisionNote {
            id: "9c01".into(),
            mode: "observe".into(),
            load: PodLoad {
                cpu_cores: 2.0,
                network_bytes_per_second: 0.0,
            },
            estimate: "request".into(),
            nodes: vec![("node-11".into(), 1.0)],
            avoided: 0,
            snapshot_age_secs: 1,
            would: Some(("node-02".into(), 0.41)),
        };
        let text = note.to_string();
        assert!(text.ends_with(" would=node-02:0.41"), "{text}");
        assert_eq!(DecisionNote::parse(&text), Some(note));
        // A reader that predates `would` still takes the rest.
        let older = text.replace(" would=node-02:0.41", " later=key");
        assert_eq!(
            DecisionNote::parse(&older).map(|n| n.nodes),
            Some(vec![("node-11".into(), 1.0)])
        );
    }

    #[test]
    fn foreign_text_is_not_a_note() {
        for text in [
            "",
            "hello",
            "mode=affinity",
            "id=x cpu=NaN",
            "id=x nodes=a:b",
        ] {
            assert_eq!(DecisionNote::parse(text), None, "{text}");
        }
    }
}
