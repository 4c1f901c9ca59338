//! Why nodes were left out of a TAS search and the messages Kueue writes when a PodSet does
//! not fit (`tasExclusionStats`, `notFitMessage`, `multiLayerNotFitMessage`), word for word.
//!
//! Knows nothing about how the counts were found.

use std::collections::BTreeMap;

/// Counts of nodes left out, by reason (`tasExclusionStats`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExclusionStats {
    /// Nodes looked at.
    pub total_nodes: usize,
    /// Left out by the nodeSelector.
    pub node_selector: usize,
    /// Left out by required node affinity.
    pub affinity: usize,
    /// Left out because they are outside the domain a replacement must stay in.
    pub topology_domain: usize,
    /// Left out per untolerated taint (`key=value:effect`).
    pub taints: BTreeMap<String, usize>,
    /// Leaves where not one pod fits, per limiting resource.
    pub resources: BTreeMap<String, usize>,
}

impl ExclusionStats {
    fn has_exclusions(&self) -> bool {
        self.node_selector > 0
            || self.affinity > 0
            || !self.taints.is_empty()
            || self.topology_domain > 0
            || !self.resources.is_empty()
    }

    fn reasons(&self) -> String {
        let mut reasons = Vec::new();
        if self.node_selector > 0 {
            reasons.push(format!("nodeSelector: {}", self.node_selector));
        }
        if self.affinity > 0 {
            reasons.push(format!("affinity: {}", self.affinity));
        }
        if self.topology_domain > 0 {
            reasons.push(format!("topologyDomain: {}", self.topology_domain));
        }
        for (taint, count) in &self.taints {
            reasons.push(format!("taint {}: {count}", go_quote(taint)));
        }
        for (resource, count) in &self.resources {
            reasons.push(format!("resource {}: {count}", go_quote(resource)));
        }
        reasons.sort();
        reasons.join(", ")
    }

    /// The `. Total nodes: N; excluded: …` suffix, empty when nothing was excluded.
    pub fn suffix(&self) -> String {
        if self.has_exclusions() {
            format!(
                ". Total nodes: {}; excluded: {}",
                self.total_nodes,
                self.reasons()
            )
        } else {
            String::new()
        }
    }
}

/// Go's `%q` for the label keys, names and values that appear in these messages.
pub fn go_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            _ => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// `notFitMessage`: "topology "t" doesn't allow to fit any of N pod(s)" or "... allows to fit
/// only F out of N slice(s)", with the exclusion suffix.
pub fn not_fit(
    topology: &str,
    fit: i32,
    requested: i32,
    slice_size: i32,
    stats: &ExclusionStats,
) -> String {
    let unit = if slice_size == 1 { "pod" } else { "slice" };
    let head = if fit == 0 {
        format!(
            "topology {} doesn't allow to fit any of {requested} {unit}(s)",
            go_quote(topology)
        )
    } else {
        format!(
            "topology {} allows to fit only {fit} out of {requested} {unit}(s)",
            go_quote(topology)
        )
    };
    head + &stats.suffix()
}
