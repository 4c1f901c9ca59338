//! Upstream's `policy/registry_test.go`: which check revisions each level and version runs,
//! with overrides, over synthetic checks whose reason names the revision (`c:v1.5`).

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::api::parse_version;
use crate::checks::{Check, CheckResult, Revision};

macro_rules! revisions {
    ($($name:ident => $reason:literal),* $(,)?) => {
        $(fn $name(_: &ObjectMeta, _: &PodSpec) -> CheckResult {
            CheckResult::forbidden($reason, "")
        })*
    };
}

revisions! {
    a_1_0 => "a:v1.0", b_1_10 => "b:v1.10", c_1_0 => "c:v1.0", c_1_5 => "c:v1.5",
    c_1_10 => "c:v1.10", d_1_11 => "d:v1.11", d_1_15 => "d:v1.15", d_1_20 => "d:v1.20",
    e_1_0 => "e:v1.0", f_1_12 => "f:v1.12", f_1_16 => "f:v1.16", f_1_21 => "f:v1.21",
    g_1_10 => "g:v1.10", h_1_0 => "h:v1.0", i_1_10 => "i:v1.10", i_1_21 => "i:v1.21",
}

fn check(id: &'static str, level: Level, revisions: &[Revision]) -> Check {
    Check::new(id, level, revisions)
}

fn baseline_checks() -> Vec<Check> {
    use Level::Baseline as B;
    vec![
        check("a", B, &[(0, a_1_0, &[])]),
        check("b", B, &[(10, b_1_10, &[])]),
        check(
            "c",
            B,
            &[(0, c_1_0, &[]), (5, c_1_5, &[]), (10, c_1_10, &[])],
        ),
        check(
            "d",
            B,
            &[(11, d_1_11, &[]), (15, d_1_15, &[]), (20, d_1_20, &[])],
        ),
    ]
}

fn restricted_checks() -> Vec<Check> {
    use Level::Restricted as R;
    vec![
        check("e", R, &[(0, e_1_0, &[])]),
        check(
            "f",
            R,
            &[(12, f_1_12, &[]), (16, f_1_16, &[]), (21, f_1_21, &[])],
        ),
        check("g", R, &[(10, g_1_10, &["a"])]),
        check("h", R, &[(0, h_1_0, &["b"])]),
    ]
}

fn reasons(evaluator: &Evaluator, level: Level, version: &str) -> Vec<String> {
    let version = parse_version(version).expect("version");
    evaluator
        .evaluate_pod(
            LevelVersion::new(level, version),
            &ObjectMeta::default(),
            &PodSpec::default(),
        )
        .into_iter()
        .map(|r| r.forbidden_reason)
        .collect()
}

fn assert_cases(evaluator: &Evaluator, cases: &[(Level, &str, &[&str])]) {
    for (level, version, want) in cases {
        assert_eq!(
            reasons(evaluator, *level, version),
            *want,
            "{level}:{version}"
        );
    }
}

#[test]
fn check_registry() {
    use Level::{Baseline as B, Privileged as P, Restricted as R};
    let mut checks = baseline_checks();
    checks.extend(restricted_checks());
    checks.push(check("i", R, &[(10, i_1_10, &["c"]), (21, i_1_21, &["d"])]));
    let evaluator = Evaluator::with_checks(&checks, None);
    assert_cases(
        &evaluator,
        &[
            (P, "v1.0", &[]),
            (P, "latest", &[]),
            (B, "v1.0", &["a:v1.0", "c:v1.0"]),
            (B, "v1.4", &["a:v1.0", "c:v1.0"]),
            (B, "v1.5", &["a:v1.0", "c:v1.5"]),
            (B, "v1.10", &["a:v1.0", "b:v1.10", "c:v1.10"]),
            (B, "v1.11", &["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.11"]),
            (B, "latest", &["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.20"]),
            (R, "v1.0", &["a:v1.0", "c:v1.0", "e:v1.0", "h:v1.0"]),
            (R, "v1.4", &["a:v1.0", "c:v1.0", "e:v1.0", "h:v1.0"]),
            (R, "v1.5", &["a:v1.0", "c:v1.5", "e:v1.0", "h:v1.0"]),
            (R, "v1.10", &["e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"]),
            (
                R,
                "v1.11",
                &["d:v1.11", "e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"],
            ),
            (
                R,
                "latest",
                &[
                    "c:v1.10", "e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0", "i:v1.21",
                ],
            ),
            (
                R,
                "v1.10000",
                &[
                    "c:v1.10", "e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0", "i:v1.21",
                ],
            ),
        ],
    );
}

#[test]
fn check_registry_without_baseline() {
    use Level::{Baseline as B, Privileged as P, Restricted as R};
    let evaluator = Evaluator::with_checks(&restricted_checks(), None);
    assert_cases(
        &evaluator,
        &[
            (P, "v1.0", &[]),
            (P, "latest", &[]),
            (B, "v1.0", &[]),
            (B, "v1.10", &[]),
            (B, "latest", &[]),
            (R, "v1.0", &["e:v1.0", "h:v1.0"]),
            (R, "v1.10", &["e:v1.0", "g:v1.10", "h:v1.0"]),
            (R, "latest", &["e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0"]),
            (R, "v1.10000", &["e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0"]),
        ],
    );
}

#[test]
fn check_registry_without_restricted_and_empty() {
    let evaluator = Evaluator::with_checks(&baseline_checks(), None);
    let cases: [(&str, &[&str]); 6] = [
        ("v1.0", &["a:v1.0", "c:v1.0"]),
        ("v1.4", &["a:v1.0", "c:v1.0"]),
        ("v1.5", &["a:v1.0", "c:v1.5"]),
        ("v1.10", &["a:v1.0", "b:v1.10", "c:v1.10"]),
        ("v1.11", &["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.11"]),
        ("latest", &["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.20"]),
    ];
    for (version, want) in cases {
        // Restricted runs exactly baseline's checks.
        for level in [Level::Baseline, Level::Restricted] {
            assert_eq!(
                reasons(&evaluator, level, version),
                want,
                "{level}:{version}"
            );
        }
    }
    let empty = Evaluator::with_checks(&[], None);
    for level in [Level::Privileged, Level::Baseline, Level::Restricted] {
        assert!(reasons(&empty, level, "latest").is_empty());
    }
}

#[test]
fn emulation_caps_latest_and_aggregation_reads_as_upstream() {
    let evaluator = Evaluator::with_checks(&baseline_checks(), Some(Version::new(1, 12)));
    assert_eq!(evaluator.max_version(), Version::new(1, 12));
    assert_eq!(
        reasons(&evaluator, Level::Baseline, "latest"),
        ["a:v1.0", "b:v1.10", "c:v1.10", "d:v1.11"]
    );
    assert_eq!(Evaluator::new(None).max_version(), Version::new(1, 37));
    let results = [
        CheckResult::forbidden("host ports", "8080, 9090"),
        CheckResult::allowed(),
        CheckResult::forbidden("privileged containers", ""),
        CheckResult::forbidden("", "x"),
    ];
    let aggregate = aggregate_check_results(&results);
    assert!(!aggregate.allowed);
    assert_eq!(
        aggregate.forbidden_reason(),
        "host ports, privileged containers, unknown forbidden reason"
    );
    assert_eq!(
        aggregate.forbidden_detail(),
        "host ports (8080, 9090), privileged containers, unknown forbidden reason (x)"
    );
    assert!(aggregate_check_results(&[CheckResult::allowed()]).allowed);
}
