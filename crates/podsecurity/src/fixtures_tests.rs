//! Upstream's fixture table (`test/fixtures_*.go`, rendered in its `test/testdata`): every
//! pass/fail pod of every check at every level and policy version, evaluated with upstream's
//! full check set (no emulated version).

use serde_json::Value;

use crate::api::{Level, LevelVersion, parse_version};
use crate::evaluator::Evaluator;

const FIXTURES: &str = include_str!("../testdata/fixtures.json");

/// The API server's defaulting the fixtures rely on: a volume without a source is an
/// `emptyDir` (upstream's `SetDefaults_Volume`).
fn defaulted(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for volume in spec
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(fields) = volume.as_object_mut()
            && fields.len() == 1
        {
            fields.insert("emptyDir".into(), Value::Object(Default::default()));
        }
    }
    spec
}

#[test]
fn every_upstream_fixture_passes_or_fails_as_upstream_expects() {
    let fixtures: Value = serde_json::from_str(FIXTURES).expect("fixtures");
    let pods = fixtures["pods"].as_array().expect("pods");
    let cases = fixtures["cases"].as_object().expect("cases");
    let evaluator = Evaluator::new(None);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (key, entry) in cases {
        let (level, version) = key.split_once('/').expect("level/version");
        let level = match level {
            "baseline" => Level::Baseline,
            "restricted" => Level::Restricted,
            other => panic!("unknown level {other}"),
        };
        let version = parse_version(version).expect("version");
        let policy = LevelVersion::new(level, version);
        for (outcome, expect_allowed) in [("pass", true), ("fail", false)] {
            for case in entry[outcome].as_array().into_iter().flatten() {
                let name = case[0].as_str().expect("name");
                let pod = &pods[case[1].as_u64().expect("index") as usize];
                let meta = serde_json::from_value(pod["metadata"].clone()).expect("metadata");
                let spec = serde_json::from_value(defaulted(&pod["spec"])).expect("spec");
                let result = evaluator.aggregate(policy, &meta, &spec);
                checked += 1;
                if result.allowed != expect_allowed {
                    wrong.push(format!(
                        "{key} {outcome}/{name}: {}",
                        result.forbidden_detail()
                    ));
                }
            }
        }
    }
    assert_eq!(checked, 4537);
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
