//! Live node load from Prometheus, refreshed in the background.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusConfig {
    pub url: String,
}

impl PrometheusConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.url.is_empty() {
            return Err("url is empty".into());
        }
        Ok(())
    }
}
