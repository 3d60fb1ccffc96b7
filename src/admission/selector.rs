//! Which pods are targets: the configured label selector against a pod's labels. (Node
//! selectors and taints are the scheduler model's: `scheduler::terms`.)

use std::collections::BTreeMap;

use crate::config::{LabelRequirement, SelectorOperator, Targets};

/// Does a pod with these labels match the configured target selector?
pub(crate) fn targets_match(targets: &Targets, labels: &BTreeMap<String, String>) -> bool {
    targets
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && targets
            .match_expressions
            .iter()
            .all(|r| label_requirement_matches(r, labels))
}

/// Why a pod with these labels is not a target: the first requirement of `targets` they miss,
/// e.g. ``no `component=taskmanager` label``. `None` when they match.
pub(crate) fn targets_miss(targets: &Targets, labels: &BTreeMap<String, String>) -> Option<String> {
    let listed = |values: &[String]| values.join(", ");
    for (k, v) in &targets.match_labels {
        match labels.get(k) {
            None => return Some(format!("no `{k}={v}` label")),
            Some(got) if got != v => return Some(format!("label `{k}={got}`, not `{k}={v}`")),
            Some(_) => {}
        }
    }
    for r in &targets.match_expressions {
        if label_requirement_matches(r, labels) {
            continue;
        }
        let key = &r.key;
        let got = labels.get(key).map_or("", String::as_str);
        return Some(match r.operator {
            SelectorOperator::In if labels.contains_key(key) => {
                format!("label `{key}={got}` is none of {}", listed(&r.values))
            }
            SelectorOperator::In => format!("no `{key}` label (one of {})", listed(&r.values)),
            SelectorOperator::NotIn => format!("label `{key}={got}` is excluded"),
            SelectorOperator::Exists => format!("no `{key}` label"),
            SelectorOperator::DoesNotExist => format!("a `{key}` label"),
        });
    }
    None
}

fn label_requirement_matches(r: &LabelRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&r.key);
    match r.operator {
        SelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
        SelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
        SelectorOperator::Exists => value.is_some(),
        SelectorOperator::DoesNotExist => value.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LabelRequirement, SelectorOperator};

    #[test]
    fn default_targets_are_flink_taskmanagers() {
        let targets = Targets::default();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(targets_match(
            &targets,
            &labels(&[
                ("component", "taskmanager"),
                ("type", "flink-native-kubernetes")
            ])
        ));
        assert!(!targets_match(
            &targets,
            &labels(&[
                ("component", "jobmanager"),
                ("type", "flink-native-kubernetes")
            ])
        ));
        assert!(!targets_match(
            &targets,
            &labels(&[("component", "taskmanager")])
        ));
        let absent = Targets {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelRequirement {
                key: "skip".into(),
                operator: SelectorOperator::DoesNotExist,
                values: Vec::new(),
            }],
        };
        assert!(targets_match(&absent, &labels(&[])));
        assert!(!targets_match(&absent, &labels(&[("skip", "")])));
    }
}
