//! Which pods are targets: the configured label selector against a pod's labels. (Node
//! selectors and taints are the scheduler model's: `scheduler::terms`.)

use std::collections::BTreeMap;

use crate::config::{LabelRequirement, SelectorOperator, Targets};

/// Does a pod with these labels match the configured target selector?
pub fn targets_match(targets: &Targets, labels: &BTreeMap<String, String>) -> bool {
    targets
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && targets
            .match_expressions
            .iter()
            .all(|r| label_requirement_matches(r, labels))
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
