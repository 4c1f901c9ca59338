//! Upstream's `api/helpers_test.go` as tables.

use super::*;

const LATEST: Version = Version::Latest;

fn lv(level: Level, version: Version) -> LevelVersion {
    LevelVersion::new(level, version)
}

#[test]
fn parse_version_as_upstream() {
    for (text, want) in [
        ("latest", LATEST),
        ("v1.0", Version::new(1, 0)),
        ("v1.1", Version::new(1, 1)),
        ("v1.20", Version::new(1, 20)),
        ("v1.10000", Version::new(1, 10000)),
    ] {
        assert_eq!(parse_version(text), Ok(want), "{text}");
    }
    for text in [
        "foo", "", "v2.0", "v1", "1.1", "v1.01", "v1.", "v1.x", "v1.-1",
    ] {
        let error = parse_version(text).expect_err(text);
        assert_eq!(error, (LATEST, r#"must be "latest" or "v1.x""#.to_string()));
    }
}

#[test]
fn parse_level_as_upstream() {
    assert_eq!(parse_level("baseline"), Ok(Level::Baseline));
    assert_eq!(
        parse_level("Baseline"),
        Err((
            Level::Restricted,
            "must be one of privileged, baseline, restricted".into()
        ))
    );
}

#[test]
fn versions_order_with_latest_newest() {
    assert!(Version::new(1, 9).older(Version::new(1, 10)));
    assert!(Version::new(1, 30).older(LATEST));
    assert!(!LATEST.older(Version::new(1, 99)));
    assert!(!LATEST.older(LATEST));
    assert_eq!(
        lv(Level::Restricted, LATEST).to_string(),
        "restricted:latest"
    );
    assert_eq!(
        lv(Level::Baseline, Version::new(1, 22)).to_string(),
        "baseline:v1.22"
    );
}

#[test]
fn level_versions_are_equivalent_as_upstream() {
    let levels = [Level::Privileged, Level::Baseline, Level::Restricted];
    let versions = [LATEST, Version::new(1, 18), Version::new(1, 30)];
    for l in levels {
        for v in versions {
            assert!(lv(l, v).equivalent(&lv(l, v)));
        }
        for l2 in levels.into_iter().filter(|l2| *l2 != l) {
            assert!(!lv(l, LATEST).equivalent(&lv(l2, LATEST)));
        }
    }
    for v1 in versions {
        for v2 in [Version::new(1, 16), Version::new(1, 13)] {
            for l in [Level::Baseline, Level::Restricted] {
                assert!(!lv(l, v1).equivalent(&lv(l, v2)));
            }
            assert!(lv(Level::Privileged, v1).equivalent(&lv(Level::Privileged, v2)));
        }
    }
}

#[test]
fn policies_are_equivalent_as_upstream() {
    let privileged_lv = lv(Level::Privileged, LATEST);
    let privileged = Policy {
        enforce: privileged_lv,
        audit: privileged_lv,
        warn: privileged_lv,
    };
    assert!(privileged.fully_privileged());
    let mut privileged2 = privileged;
    privileged2.enforce.version = Version::new(1, 20);
    assert!(privileged2.fully_privileged());
    let mut baseline = privileged;
    baseline.audit.level = Level::Baseline;
    assert!(!baseline.fully_privileged());
    assert!(privileged.equivalent(&privileged2));
    assert!(baseline.equivalent(&baseline));
    assert!(!privileged.equivalent(&baseline));
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([("other-label".to_string(), "foo-bar".to_string())]);
    for (key, value) in pairs {
        labels.insert(format!("{LABEL_PREFIX}{key}"), value.to_string());
    }
    labels
}

#[test]
fn policy_to_evaluate_as_upstream() {
    use Level::{Baseline, Privileged, Restricted};
    let p = lv(Privileged, LATEST);
    let defaults = Policy {
        enforce: p,
        audit: p,
        warn: p,
    };
    let v = Version::new;
    // (description, labels, enforce, warn, audit, error expected)
    type Case = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        LevelVersion,
        LevelVersion,
        LevelVersion,
        bool,
    );
    let cases: Vec<Case> = vec![
        (
            "simple enforce",
            vec![("enforce", "baseline")],
            lv(Baseline, LATEST),
            lv(Baseline, LATEST),
            p,
            false,
        ),
        (
            "simple warn",
            vec![("warn", "restricted")],
            p,
            lv(Restricted, LATEST),
            p,
            false,
        ),
        (
            "simple audit",
            vec![("audit", "baseline")],
            p,
            p,
            lv(Baseline, LATEST),
            false,
        ),
        (
            "enforce & warn",
            vec![("enforce", "baseline"), ("warn", "restricted")],
            lv(Baseline, LATEST),
            lv(Restricted, LATEST),
            p,
            false,
        ),
        (
            "enforce version",
            vec![("enforce", "baseline"), ("enforce-version", "v1.22")],
            lv(Baseline, v(1, 22)),
            lv(Baseline, v(1, 22)),
            p,
            false,
        ),
        (
            "enforce version & warn-version",
            vec![
                ("enforce", "baseline"),
                ("enforce-version", "v1.22"),
                ("warn-version", "latest"),
            ],
            lv(Baseline, v(1, 22)),
            lv(Baseline, LATEST),
            p,
            false,
        ),
        (
            "enforce & warn-version",
            vec![("enforce", "baseline"), ("warn-version", "v1.23")],
            lv(Baseline, LATEST),
            lv(Baseline, v(1, 23)),
            p,
            false,
        ),
        (
            "fully specd",
            vec![
                ("enforce", "baseline"),
                ("enforce-version", "v1.20"),
                ("warn", "restricted"),
                ("warn-version", "v1.21"),
                ("audit", "restricted"),
                ("audit-version", "v1.22"),
            ],
            lv(Baseline, v(1, 20)),
            lv(Restricted, v(1, 21)),
            lv(Restricted, v(1, 22)),
            false,
        ),
        (
            "enforce no warn",
            vec![("enforce", "baseline"), ("warn", "privileged")],
            lv(Baseline, LATEST),
            p,
            p,
            false,
        ),
        (
            "enforce warn error",
            vec![("enforce", "baseline"), ("warn", "foo")],
            lv(Baseline, LATEST),
            p,
            p,
            true,
        ),
        (
            "enforce error",
            vec![("enforce", "foo")],
            lv(Restricted, LATEST),
            p,
            p,
            true,
        ),
    ];
    for (description, pairs, enforce, warn, audit, expect_error) in cases {
        let (policy, errors) = policy_to_evaluate(&labels(&pairs), defaults);
        assert_eq!(
            policy,
            Policy {
                enforce,
                audit,
                warn
            },
            "{description}"
        );
        assert_eq!(!errors.is_empty(), expect_error, "{description}");
    }
}

#[test]
fn label_errors_read_as_upstream_field_errors() {
    let (_, errors) = policy_to_evaluate(&labels(&[("enforce", "foo")]), Policy::default());
    assert_eq!(
        aggregate(&errors),
        r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "foo": must be one of privileged, baseline, restricted"#
    );
    let (_, errors) = policy_to_evaluate(
        &labels(&[("enforce", "foo"), ("enforce-version", "1.2")]),
        Policy::default(),
    );
    assert_eq!(
        aggregate(&errors),
        r#"[metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "foo": must be one of privileged, baseline, restricted, metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "1.2": must be "latest" or "v1.x"]"#
    );
}
