//! The evaluator of upstream's `policy/registry.go`: for every policy version from v1.0 to the
//! newest a check names, the ordered checks of baseline and of restricted (baseline's checks
//! first, then restricted's, each sorted by id; a restricted revision's overrides drop the
//! baseline checks it supersedes), and the aggregation of their results into upstream's
//! reasons and details (`policy/checks.go`).
//!
//! `latest` and versions newer than the newest evaluate as the newest; an emulated version
//! (the API server's own minor) lowers that ceiling, as upstream's `NewEvaluator` does.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{Level, LevelVersion, Version};
use crate::checks::{Check, CheckPodFn, CheckResult, VersionedCheck, default_checks};

/// The checks of each level at each version.
pub struct Evaluator {
    baseline: HashMap<Version, Vec<CheckPodFn>>,
    restricted: HashMap<Version, Vec<CheckPodFn>>,
    max_version: Version,
}

impl Evaluator {
    /// The evaluator of upstream's default checks, `latest` meaning the newest policy version
    /// a check names, or `emulation` when that is older.
    pub fn new(emulation: Option<Version>) -> Evaluator {
        Evaluator::with_checks(&default_checks(), emulation)
    }

    /// An evaluator of the given checks.
    pub fn with_checks(checks: &[Check], emulation: Option<Version>) -> Evaluator {
        let mut max_version = Version::new(0, 0);
        for check in checks {
            if let Some(last) = check.versions.last()
                && max_version.older(last.minimum_version)
            {
                max_version = last.minimum_version;
            }
        }
        let mut baseline_by_version: BTreeMap<(u32, u32), BTreeMap<&str, VersionedCheck>> =
            BTreeMap::new();
        let mut restricted_by_version = baseline_by_version.clone();
        let mut baseline_ids = Vec::new();
        let mut restricted_ids = Vec::new();
        for check in checks {
            let (target, ids) = if check.level == Level::Restricted {
                (&mut restricted_by_version, &mut restricted_ids)
            } else {
                (&mut baseline_by_version, &mut baseline_ids)
            };
            ids.push(check.id);
            inflate(check, target, max_version);
        }
        baseline_ids.sort_unstable();
        restricted_ids.sort_unstable();
        let ordered: Vec<&str> = baseline_ids.into_iter().chain(restricted_ids).collect();
        let mut evaluator = Evaluator {
            baseline: HashMap::new(),
            restricted: HashMap::new(),
            max_version,
        };
        let mut version = Version::new(1, 0);
        while version.older(max_version.next_minor()) {
            let key = minor_key(version);
            let baseline = baseline_by_version.remove(&key).unwrap_or_default();
            let mut restricted = restricted_by_version.remove(&key).unwrap_or_default();
            let overridden: Vec<&str> = restricted
                .values()
                .flat_map(|c| c.override_check_ids.iter().copied())
                .collect();
            for (id, check) in &baseline {
                if !overridden.contains(id) {
                    restricted.insert(id, *check);
                }
            }
            evaluator
                .restricted
                .insert(version, ordered_fns(&restricted, &ordered));
            evaluator
                .baseline
                .insert(version, ordered_fns(&baseline, &ordered));
            version = version.next_minor();
        }
        if let Some(emulation) = emulation
            && emulation.older(evaluator.max_version)
        {
            evaluator.max_version = emulation;
        }
        evaluator
    }

    /// The newest policy version this evaluator distinguishes (what `latest` means).
    pub fn max_version(&self) -> Version {
        self.max_version
    }

    /// Upstream's `EvaluatePod`: every check of the level at the version, in order.
    pub fn evaluate_pod(
        &self,
        policy: LevelVersion,
        meta: &ObjectMeta,
        spec: &PodSpec,
    ) -> Vec<CheckResult> {
        let version = if self.max_version.older(policy.version) {
            self.max_version
        } else {
            policy.version
        };
        let checks = match policy.level {
            Level::Privileged => return Vec::new(),
            Level::Baseline => self.baseline.get(&version),
            Level::Restricted => self.restricted.get(&version),
        };
        checks
            .into_iter()
            .flatten()
            .map(|check| check(meta, spec))
            .collect()
    }

    /// [`Evaluator::evaluate_pod`], aggregated.
    pub fn aggregate(
        &self,
        policy: LevelVersion,
        meta: &ObjectMeta,
        spec: &PodSpec,
    ) -> AggregateCheckResult {
        aggregate_check_results(&self.evaluate_pod(policy, meta, spec))
    }
}

fn minor_key(version: Version) -> (u32, u32) {
    match version {
        Version::Minor(major, minor) => (major, minor),
        Version::Latest => (u32::MAX, u32::MAX),
    }
}

/// Upstream's `inflateVersions`: each revision holds from its minimum version to the next
/// revision's (the last to the newest version).
fn inflate<'c>(
    check: &'c Check,
    versions: &mut BTreeMap<(u32, u32), BTreeMap<&'c str, VersionedCheck>>,
    max_version: Version,
) {
    for (i, revision) in check.versions.iter().enumerate() {
        let next = check
            .versions
            .get(i + 1)
            .map_or(max_version.next_minor(), |n| n.minimum_version);
        let mut version = revision.minimum_version;
        while version.older(next) {
            versions
                .entry(minor_key(version))
                .or_default()
                .insert(check.id, *revision);
            version = version.next_minor();
        }
    }
}

fn ordered_fns(checks: &BTreeMap<&str, VersionedCheck>, ordered: &[&str]) -> Vec<CheckPodFn> {
    ordered
        .iter()
        .filter_map(|id| checks.get(id).map(|c| c.check_pod))
        .collect()
}

/// The forbidden results of several checks, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AggregateCheckResult {
    /// Whether every check allowed the pod.
    pub allowed: bool,
    /// The forbidden reasons.
    pub forbidden_reasons: Vec<String>,
    /// The details, one per reason (possibly empty).
    pub forbidden_details: Vec<String>,
}

/// Upstream's placeholder for a check that refuses without a reason.
pub const UNKNOWN_FORBIDDEN_REASON: &str = "unknown forbidden reason";

/// Upstream's `AggregateCheckResults`.
pub fn aggregate_check_results(results: &[CheckResult]) -> AggregateCheckResult {
    let mut aggregate = AggregateCheckResult::default();
    for result in results.iter().filter(|r| !r.allowed) {
        aggregate
            .forbidden_reasons
            .push(if result.forbidden_reason.is_empty() {
                UNKNOWN_FORBIDDEN_REASON.to_string()
            } else {
                result.forbidden_reason.clone()
            });
        aggregate
            .forbidden_details
            .push(result.forbidden_detail.clone());
    }
    aggregate.allowed = aggregate.forbidden_reasons.is_empty();
    aggregate
}

impl AggregateCheckResult {
    /// The reasons, comma-separated (`host ports, privileged`).
    pub fn forbidden_reason(&self) -> String {
        self.forbidden_reasons.join(", ")
    }

    /// The reasons with their non-empty details in parentheses.
    pub fn forbidden_detail(&self) -> String {
        self.forbidden_reasons
            .iter()
            .zip(&self.forbidden_details)
            .map(|(reason, detail)| {
                if detail.is_empty() {
                    reason.clone()
                } else {
                    format!("{reason} ({detail})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
#[path = "evaluator_tests.rs"]
mod tests;
