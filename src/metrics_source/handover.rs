//! Each published snapshot is evidence for the in-flight ledger: the charges of pods the
//! metrics now show end or shrink (see `inflight::ledger::handover`).

use std::time::Instant;

use tracing::info;

use crate::inflight::ledger::handover::{Evidence, InForce};
use crate::inflight::shared::SharedWorld;
use crate::telemetry::{Charged, InflightByNode, Metrics, NodeCharges};

/// Hands the ledger's charges over to each new snapshot, saying when the rule in force changes.
#[derive(Debug, Default)]
pub(crate) struct HandoverReader {
    in_force: Option<InForce>,
}

impl HandoverReader {
    pub(crate) fn read(&mut self, world: &SharedWorld, evidence: &Evidence, metrics: &Metrics) {
        let report = world
            .write()
            .charges
            .read_evidence(evidence, Instant::now());
        let load = |l: crate::inflight::ledger::PodLoad| Charged {
            cpu_cores: l.cpu_cores,
            network_bytes_per_second: l.network_bytes_per_second,
        };
        metrics.handover.record(
            report.in_force.as_str(),
            load(report.charged),
            load(report.counted_twice),
            (&report.ages, report.oldest),
        );
        metrics.handover.publish_by_node(InflightByNode {
            rule: report.in_force.as_str(),
            taken_at: (evidence.taken_at())
                .map(|t| humantime::format_rfc3339_millis(t).to_string()),
            nodes: report
                .by_node
                .iter()
                .map(|n| NodeCharges {
                    node: n.node.clone(),
                    charged: load(n.charged),
                    counted_twice: load(n.counted_twice),
                })
                .collect(),
        });
        if self.in_force != Some(report.in_force) {
            let ends_on = match report.in_force {
                InForce::PodReadings => "the pods' own readings and the rate window",
                InForce::Timing => {
                    "the rate window's timing alone: the metrics show no pod readings"
                }
                InForce::Ttl => "the fixed inflight.ttl",
            };
            info!(
                rule = report.in_force.as_str(),
                ends_on, "in-flight charges: handover rule in force"
            );
            self.in_force = Some(report.in_force);
        }
    }
}
