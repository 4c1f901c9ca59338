//! Runbooks that diagnose. Each runbook reads one [`Cluster`] snapshot (and the time) and
//! returns a [`Report`]: what it looked at, what it found, each finding with a severity, and
//! the next steps for what it found — the same procedures `docs/runbooks/` gives people.
//!
//! - [`pending`]: why pods stay `Pending` (scheduling gates, the scheduler's verdict node by
//!   node through `tessera-scheduler`, GPU shortfalls from unhealthy devices, cordons and
//!   taints, MIG profiles nobody offers, bound pods a kubelet will not start, controllers that
//!   cannot create their pods).
//! - [`device_loss`]: GPUs that reported a fatal XID or dropped out of a node's allocatable,
//!   the pods they took down and NVIDIA's recovery for each XID.
//! - [`node_notready`]: nodes whose Ready condition is not `True`, since when, their taints and
//!   when each of their pods is evicted (by the node lifecycle core's own rule).
//! - [`operator`]: the GPU operator's components (DaemonSets and pods in its namespace),
//!   missing GPU feature discovery labels, stale ResourceSlices and failed driver upgrades.
//!
//! Pure: objects and the time in, findings out. Knows no API client and prints nothing; the
//! `tessera diagnose` shell lists the objects and prints [`Report::render`].

use std::fmt::Write;
use std::time::SystemTime;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};

pub mod device_loss;
pub mod node_notready;
pub mod operator;
pub mod pending;
mod read;

pub use device_loss::device_loss;
pub use node_notready::node_notready;
pub use operator::operator;
pub use pending::pending;

/// What a runbook reads: every object of these kinds, from every namespace.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Pods.
    pub pods: Vec<Pod>,
    /// Events (`core/v1`).
    pub events: Vec<Event>,
    /// Node Leases (`kube-node-lease`).
    pub leases: Vec<Lease>,
    /// DaemonSets.
    pub daemonsets: Vec<DaemonSet>,
    /// ResourceClaims.
    pub claims: Vec<ResourceClaim>,
    /// ResourceSlices.
    pub slices: Vec<ResourceSlice>,
    /// DeviceClasses.
    pub classes: Vec<DeviceClass>,
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Looked at, and healthy.
    Ok,
    /// Worth knowing; not a fault.
    Info,
    /// A cause of what the runbook is about.
    Problem,
}

impl Severity {
    /// The word the report prints.
    pub fn word(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Problem => "PROBLEM",
        }
    }
}

/// One thing a runbook found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// What it is about (`pod team-a/train-0`, `node gpu-1`, `GPU 3 of gpu-1`).
    pub subject: String,
    /// What was found, in one sentence.
    pub text: String,
}

impl Finding {
    fn new(severity: Severity, subject: impl Into<String>, text: impl Into<String>) -> Finding {
        Finding {
            severity,
            subject: subject.into(),
            text: text.into(),
        }
    }
}

/// What a runbook found and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// The runbook's title.
    pub title: String,
    /// What it looked at, in one line (`12 pods pending, 0 nodes NotReady`).
    pub scope: String,
    /// The findings, in the order found.
    pub findings: Vec<Finding>,
    /// The next steps, in order, each once.
    pub next_steps: Vec<String>,
}

impl Report {
    fn new(title: &str) -> Report {
        Report {
            title: title.to_string(),
            ..Report::default()
        }
    }

    fn found(&mut self, severity: Severity, subject: impl Into<String>, text: impl Into<String>) {
        self.findings.push(Finding::new(severity, subject, text));
    }

    fn next(&mut self, step: impl Into<String>) {
        let step = step.into();
        if !self.next_steps.contains(&step) {
            self.next_steps.push(step);
        }
    }

    /// How many findings are problems.
    pub fn problems(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Problem)
            .count()
    }

    /// The report as `tessera diagnose` prints it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.title);
        if !self.scope.is_empty() {
            let _ = writeln!(out, "Checked: {}", self.scope);
        }
        let _ = writeln!(out, "Found:");
        if self.findings.is_empty() {
            let _ = writeln!(out, "  nothing");
        }
        for finding in &self.findings {
            let _ = writeln!(
                out,
                "  [{}] {}: {}",
                finding.severity.word(),
                finding.subject,
                finding.text
            );
        }
        if !self.next_steps.is_empty() {
            let _ = writeln!(out, "Next steps:");
            for (i, step) in self.next_steps.iter().enumerate() {
                let _ = writeln!(out, "  {}. {step}", i + 1);
            }
        }
        out
    }
}

/// How long ago `then` was, as kubectl prints ages (`45s`, `3m10s`, `2d`).
pub fn age(now: SystemTime, then: SystemTime) -> String {
    let seconds = now.duration_since(then).unwrap_or_default().as_secs();
    tessera_api::table::human_duration(i64::try_from(seconds).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
