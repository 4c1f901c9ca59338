//! Kueue's tables: `job_webhook_test.go` (the topology cases of `TestValidateCreate`, with
//! their exact field paths and messages) and `tas_validation_test.go` (the multi-layer
//! constraints and slice-size bounds, by how many errors each case has).

use serde_json::{Value, json};

use super::*;

const MORE_THAN_ONE: &str = r#"spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation: ["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-unconstrained-topology"]"#;

fn job(parallelism: i64, annotations: &[(&str, &str)]) -> Value {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "job", "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
        "spec": {"parallelism": parallelism,
            "template": {"metadata": {"annotations": annotations}, "spec": {"containers": []}}}})
}

/// (case, the Job's parallelism, its template's annotations, what is expected).
type Case<'a, T> = (&'a str, i64, Vec<(&'a str, &'a str)>, T);

fn described(causes: &[Cause]) -> Vec<String> {
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

#[test]
fn job_topology_annotations_are_refused_as_kueues_job_webhook_refuses_them() {
    let key = |annotation: &str| format!("spec.template.metadata.annotations[{annotation}]");
    let cases: Vec<Case<'_, Vec<String>>> = vec![
        (
            "valid topology request",
            1,
            vec![(REQUIRED, "cloud.com/block")],
            vec![],
        ),
        (
            "invalid topology request - both annotations",
            1,
            vec![
                (REQUIRED, "cloud.com/block"),
                (PREFERRED, "cloud.com/block"),
            ],
            vec![MORE_THAN_ONE.to_string()],
        ),
        (
            "invalid topology request - invalid required",
            1,
            vec![(REQUIRED, "some required value")],
            vec![format!(
                "{}: Invalid value: \"some required value\": {}",
                key(REQUIRED),
                check_qualified_name("some required value").expect("invalid")
            )],
        ),
        (
            "valid slice topology request",
            1,
            vec![
                (REQUIRED, "cloud.com/block"),
                (SLICE_REQUIRED, "cloud.com/block"),
                (SLICE_SIZE, "1"),
            ],
            vec![],
        ),
        (
            "valid topology request - slice-only topology - unconstrained with slices defined",
            1,
            vec![
                (UNCONSTRAINED, "true"),
                (SLICE_REQUIRED, "cloud.com/block"),
                (SLICE_SIZE, "1"),
            ],
            vec![],
        ),
        (
            "invalid topology request - slice requested without slice size",
            1,
            vec![
                (REQUIRED, "cloud.com/block"),
                (SLICE_REQUIRED, "cloud.com/block"),
            ],
            vec![format!(
                "{}: Required value: must be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified",
                key(SLICE_SIZE)
            )],
        ),
        (
            "invalid topology request - slice size is not a number",
            1,
            vec![
                (REQUIRED, "cloud.com/block"),
                (SLICE_REQUIRED, "cloud.com/block"),
                (SLICE_SIZE, "not a number"),
            ],
            vec![format!(
                "{}: Invalid value: \"not a number\": must be a numeric value",
                key(SLICE_SIZE)
            )],
        ),
        (
            "invalid topology request - slice size is negative",
            1,
            vec![
                (REQUIRED, "cloud.com/block"),
                (SLICE_REQUIRED, "cloud.com/block"),
                (SLICE_SIZE, "-1"),
            ],
            vec![format!(
                "{}: Invalid value: \"-1\": must be greater than or equal to 1",
                key(SLICE_SIZE)
            )],
        ),
        (
            "invalid topology request - slice size is zero",
            1,
            vec![
                (REQUIRED, "cloud.com/block"),
                (SLICE_REQUIRED, "cloud.com/block"),
                (SLICE_SIZE, "0"),
            ],
            vec![format!(
                "{}: Invalid value: \"0\": must be greater than or equal to 1",
                key(SLICE_SIZE)
            )],
        ),
        (
            "invalid topology request - slice size provided without slice topology",
            1,
            vec![(REQUIRED, "cloud.com/block"), (SLICE_SIZE, "1")],
            vec![format!(
                "{}: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified",
                key(SLICE_SIZE)
            )],
        ),
        (
            "valid topology request - slice-only topology",
            1,
            vec![(SLICE_REQUIRED, "cloud.com/block"), (SLICE_SIZE, "1")],
            vec![],
        ),
        (
            "invalid slice topology request - slice size larger than number of podsets",
            4,
            vec![
                (REQUIRED, "cloud.com/block"),
                (SLICE_REQUIRED, "cloud.com/block"),
                (SLICE_SIZE, "20"),
            ],
            vec![format!(
                "{}: Invalid value: \"20\": must not be greater than pod set count 4",
                key(SLICE_SIZE)
            )],
        ),
        (
            "unconstrained must be a boolean",
            1,
            vec![(UNCONSTRAINED, "sometimes")],
            vec![format!(
                "{}: Invalid value: \"sometimes\": must be a boolean value",
                key(UNCONSTRAINED)
            )],
        ),
        (
            "a group needs a required or preferred level",
            1,
            vec![(GROUP_NAME, "group1")],
            vec![format!(
                "{}: Forbidden: may not be set when neither 'kueue.x-k8s.io/podset-preferred-topology' nor 'kueue.x-k8s.io/podset-required-topology' is specified",
                key(GROUP_NAME)
            )],
        ),
        (
            "a group name is not a number",
            1,
            vec![(REQUIRED, "cloud.com/rack"), (GROUP_NAME, "42")],
            vec![format!(
                "{}: Invalid value: \"42\": must not be a number",
                key(GROUP_NAME)
            )],
        ),
    ];
    for (name, parallelism, annotations, want) in cases {
        let got = described(&validate("batch", "Job", &job(parallelism, &annotations)));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn multi_layer_constraints_and_slice_bounds_count_as_kueues_tables_count() {
    let block = (REQUIRED, "cloud.com/block");
    let cases: Vec<Case<'_, usize>> = vec![
        (
            "valid: single constraint layer",
            64,
            vec![
                block,
                (CONSTRAINTS, r#"[{"topology":"cloud.com/rack","size":16}]"#),
            ],
            0,
        ),
        (
            "valid: two constraint layers",
            64,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4}]"#,
                ),
            ],
            0,
        ),
        (
            "valid: three constraint layers",
            64,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"cloud.com/rack","size":16},{"topology":"cloud.com/sub-rack","size":4},{"topology":"kubernetes.io/hostname","size":2}]"#,
                ),
            ],
            0,
        ),
        (
            "invalid: not valid JSON",
            64,
            vec![block, (CONSTRAINTS, "invalid-json")],
            1,
        ),
        (
            "invalid: empty array",
            64,
            vec![block, (CONSTRAINTS, "[]")],
            1,
        ),
        (
            "invalid: more than 3 entries",
            64,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"a","size":64},{"topology":"b","size":16},{"topology":"c","size":4},{"topology":"d","size":1}]"#,
                ),
            ],
            1,
        ),
        (
            "invalid: size less than 1",
            64,
            vec![
                block,
                (CONSTRAINTS, r#"[{"topology":"cloud.com/rack","size":0}]"#),
            ],
            1,
        ),
        (
            "invalid: size does not divide parent",
            64,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":5}]"#,
                ),
            ],
            1,
        ),
        (
            "invalid: mutual exclusivity with podset-slice-required-topology",
            64,
            vec![
                block,
                (SLICE_REQUIRED, "cloud.com/rack"),
                (SLICE_SIZE, "16"),
                (CONSTRAINTS, r#"[{"topology":"cloud.com/rack","size":16}]"#),
            ],
            2,
        ),
        (
            "invalid: with podset-group-name",
            64,
            vec![
                block,
                (CONSTRAINTS, r#"[{"topology":"cloud.com/rack","size":16}]"#),
                (GROUP_NAME, "group1"),
            ],
            1,
        ),
        (
            "invalid: duplicate topology labels",
            64,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"cloud.com/rack","size":16},{"topology":"cloud.com/rack","size":4}]"#,
                ),
            ],
            1,
        ),
        (
            "invalid: duplicate topology label among three entries",
            64,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4},{"topology":"cloud.com/rack","size":2}]"#,
                ),
            ],
            1,
        ),
        // TestValidateSliceSizeAnnotationUpperBound.
        (
            "valid: PodSetSliceSizeAnnotation within bound",
            20,
            vec![
                (SLICE_SIZE, "16"),
                (SLICE_REQUIRED, "cloud.com/rack"),
                block,
            ],
            0,
        ),
        (
            "invalid: PodSetSliceSizeAnnotation exceeds pod count",
            16,
            vec![
                (SLICE_SIZE, "20"),
                (SLICE_REQUIRED, "cloud.com/rack"),
                block,
            ],
            1,
        ),
        (
            "valid: multi-layer outermost size within bound",
            20,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4}]"#,
                ),
            ],
            0,
        ),
        (
            "invalid: multi-layer outermost size exceeds pod count",
            8,
            vec![
                block,
                (
                    CONSTRAINTS,
                    r#"[{"topology":"cloud.com/rack","size":16},{"topology":"kubernetes.io/hostname","size":4}]"#,
                ),
            ],
            1,
        ),
    ];
    for (name, count, annotations, want) in cases {
        let got = validate("batch", "Job", &job(count, &annotations));
        assert_eq!(got.len(), want, "{name}: {:?}", described(&got));
    }
}

#[test]
fn every_template_of_the_managed_kinds_is_checked_at_its_own_path_and_unmanaged_ones_are_not() {
    let bad = json!({"annotations": {SLICE_SIZE: "1"}});
    let jobset = json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"replicatedJobs": [
            {"name": "ok", "template": {"spec": {"template": {"metadata": {}}}}},
            {"name": "bad", "replicas": 2, "template": {"spec": {"template": {"metadata": bad}}}}]}});
    let lws = json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"leaderWorkerTemplate": {"size": 4,
            "leaderTemplate": {"metadata": bad}, "workerTemplate": {"metadata": {}}}}});
    let pod = json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"},
        "annotations": {SLICE_SIZE: "1"}}});
    let mut unmanaged = job(1, &[(SLICE_SIZE, "1")]);
    unmanaged["metadata"]["labels"] = json!({});
    let forbidden = "Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified";
    for (group, kind, object, want) in [
        (
            "jobset.x-k8s.io",
            "JobSet",
            &jobset,
            vec![format!(
                "spec.replicatedJobs[1].template.spec.template.metadata.annotations[{SLICE_SIZE}]: {forbidden}"
            )],
        ),
        (
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            &lws,
            vec![format!(
                "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations[{SLICE_SIZE}]: {forbidden}"
            )],
        ),
        (
            "",
            "Pod",
            &pod,
            vec![format!("metadata.annotations[{SLICE_SIZE}]: {forbidden}")],
        ),
        ("batch", "Job", &unmanaged, vec![]),
    ] {
        assert_eq!(described(&validate(group, kind, object)), want, "{kind}");
    }
}
