//! Upstream's defaulting (`apis/config/v1beta2/defaults_test.go`, v1beta1's conversion) and
//! validation (`pkg/config/validation_test.go`) cases, on files.

use std::time::Duration;

use super::*;

fn v1beta2(body: &str) -> String {
    format!("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n{body}")
}

fn v1beta1(body: &str) -> String {
    format!("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n{body}")
}

fn parsed(text: &str) -> Configuration {
    match parse(text) {
        Ok(configuration) => configuration,
        Err(error) => panic!("{text}\n→ {error}"),
    }
}

fn wait(timeout: u64, recovery: Option<u64>, block: bool) -> WaitForPodsReady {
    WaitForPodsReady {
        timeout: Duration::from_secs(timeout),
        block_admission: block,
        recovery_timeout: recovery.map(Duration::from_secs),
        requeuing: RequeuingStrategy {
            timestamp: RequeuingTimestamp::Eviction,
            backoff_limit_count: None,
            backoff_base_seconds: 60,
            backoff_max_seconds: 3600,
        },
    }
}

const BOTH: [FairSharingStrategy; 2] = [
    FairSharingStrategy::LessThanOrEqualToFinalShare,
    FairSharingStrategy::LessThanInitialShare,
];

#[test]
fn wait_for_pods_ready_defaults() {
    let custom = WaitForPodsReady {
        timeout: Duration::from_secs(60),
        block_admission: false,
        recovery_timeout: Some(Duration::from_secs(60)),
        requeuing: RequeuingStrategy {
            timestamp: RequeuingTimestamp::Creation,
            backoff_limit_count: Some(3),
            backoff_base_seconds: 63,
            backoff_max_seconds: 1800,
        },
    };
    let cases: Vec<(&str, String, Option<WaitForPodsReady>)> = vec![
        // v1beta2 defaults it on (`SetDefaults_Configuration`).
        ("absent", v1beta2(""), Some(wait(1800, Some(1800), false))),
        (
            "defaulting waitForPodsReady values",
            v1beta2("waitForPodsReady: {}\n"),
            Some(wait(1800, Some(1800), false)),
        ),
        (
            "defaulting waitForPodsReady recoveryTimeout to timeout",
            v1beta2("waitForPodsReady:\n  timeout: 5m\n"),
            Some(wait(300, Some(300), false)),
        ),
        (
            "respecting provided waitForPodsReady values",
            v1beta2(
                "waitForPodsReady:\n  timeout: 1m\n  recoveryTimeout: 1m\n  requeuingStrategy:\n    timestamp: Creation\n    backoffLimitCount: 3\n    backoffBaseSeconds: 63\n    backoffMaxSeconds: 1800\n",
            ),
            Some(custom),
        ),
        (
            "disabling waitForPodsReady recoveryTimeout with zero value",
            v1beta2("waitForPodsReady:\n  timeout: 5m\n  recoveryTimeout: 0s\n"),
            Some(wait(300, None, false)),
        ),
        // v1beta1: off unless enabled; on, a 5m timeout and blockAdmission true.
        ("v1beta1 absent", v1beta1(""), None),
        (
            "v1beta1 disabled",
            v1beta1("waitForPodsReady:\n  enable: false\n  timeout: 1m\n"),
            None,
        ),
        (
            "v1beta1 enabled",
            v1beta1("waitForPodsReady:\n  enable: true\n"),
            Some(wait(300, Some(300), true)),
        ),
        (
            "v1beta1 enabled, admission not blocked",
            v1beta1("waitForPodsReady:\n  enable: true\n  blockAdmission: false\n  timeout: 10m\n"),
            Some(wait(600, Some(600), false)),
        ),
    ];
    for (name, text, want) in cases {
        assert_eq!(parsed(&text).wait_for_pods_ready, want, "{name}");
    }
}

#[test]
fn fair_sharing_defaults_and_versions() {
    let cases: Vec<(&str, String, Option<Vec<FairSharingStrategy>>)> = vec![
        ("absent", v1beta2(""), None),
        (
            "one strategy",
            v1beta2("fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n"),
            Some(vec![FairSharingStrategy::LessThanInitialShare]),
        ),
        (
            "both",
            v1beta2(
                "fairSharing:\n  preemptionStrategies:\n  - LessThanOrEqualToFinalShare\n  - LessThanInitialShare\n",
            ),
            Some(BOTH.to_vec()),
        ),
        (
            "v1beta1 disabled",
            v1beta1("fairSharing:\n  enable: false\n"),
            None,
        ),
        (
            "v1beta1 enabled: both strategies by default",
            v1beta1("fairSharing:\n  enable: true\n"),
            Some(BOTH.to_vec()),
        ),
    ];
    for (name, text, want) in cases {
        let got = parsed(&text).fair_sharing.map(|f| f.strategies);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn other_defaults() {
    let configuration = parsed(&v1beta2(""));
    assert_eq!(configuration.frameworks, vec!["batch/job".to_owned()]);
    // Without a file, Tessera runs every integration it implements, each one Kueue's name.
    let without_file = Configuration::default();
    for framework in TESSERA_FRAMEWORKS {
        assert!(FRAMEWORKS.contains(framework), "{framework}");
        assert!(without_file.runs(framework), "{framework}");
    }
    assert!(!without_file.runs("ray.io/rayjob"));
    assert_eq!(configuration.namespace, "kueue-system");
    assert!(!configuration.manage_jobs_without_queue_name);
    assert_eq!(configuration.admission_fair_sharing, None);
    assert_eq!(configuration.beyond_kueue, BeyondKueue::default());

    let afs = parsed(&v1beta2(
        "admissionFairSharing:\n  usageHalfLifeTime: 168h\n  resourceWeights:\n    nvidia.com/gpu: 2.5\n",
    ))
    .admission_fair_sharing;
    let want = AdmissionFairSharing {
        usage_half_life: Duration::from_secs(168 * 3600),
        usage_sampling_interval: Duration::from_secs(300),
        resource_weights: [("nvidia.com/gpu".to_owned(), 2.5)].into(),
    };
    assert_eq!(afs, Some(want));

    let frameworks = parsed(&v1beta2("integrations:\n  frameworks: [batch/job, pod]\n"));
    assert!(frameworks.runs("pod") && frameworks.runs("batch/job"));
    assert!(!frameworks.runs("deployment"));

    let beyond = parsed(&v1beta2(
        "beyondKueue:\n  headsPerClusterQueue: 4\n  preventFlapping: true\n  minRuntimeBeforePreemption: 10m\n  topologyAwarePreemption: true\n",
    ));
    let want = BeyondKueue {
        heads_per_cluster_queue: 4,
        prevent_flapping: true,
        min_runtime_before_preemption: Some(Duration::from_secs(600)),
        topology_aware_preemption: true,
    };
    assert_eq!(beyond.beyond_kueue, want);

    let ignored = parsed(&v1beta2(
        "webhook:\n  port: 9443\nmetrics:\n  bindAddress: :8443\nleaderElection:\n  leaderElect: true\n",
    ));
    assert_eq!(ignored.ignored, ["leaderElection", "metrics", "webhook"]);
}

#[test]
fn managed_namespaces() {
    let labels = |name: &str| [("kubernetes.io/metadata.name".to_owned(), name.to_owned())].into();
    let cases: Vec<(&str, String, &str, bool)> = vec![
        ("off by default", v1beta2(""), "team-a", false),
        (
            "on",
            v1beta2("manageJobsWithoutQueueName: true\n"),
            "team-a",
            true,
        ),
        (
            "kube-system excluded by default",
            v1beta2("manageJobsWithoutQueueName: true\n"),
            "kube-system",
            false,
        ),
        (
            "Kueue's namespace excluded by default",
            v1beta2("manageJobsWithoutQueueName: true\nnamespace: queues\n"),
            "queues",
            false,
        ),
        (
            "custom selector",
            v1beta2(
                "manageJobsWithoutQueueName: true\nmanagedJobsNamespaceSelector:\n  matchLabels:\n    kubernetes.io/metadata.name: team-b\n",
            ),
            "team-a",
            false,
        ),
    ];
    for (name, text, namespace, want) in cases {
        let got = parsed(&text).manages_without_queue_name(&labels(namespace));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn validation_names_the_field() {
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "unknown apiVersion",
            "apiVersion: config.kueue.x-k8s.io/v1\nkind: Configuration\n".to_owned(),
            vec![
                "line 1: apiVersion: Unsupported value: \"config.kueue.x-k8s.io/v1\": supported values: \"config.kueue.x-k8s.io/v1beta2\", \"config.kueue.x-k8s.io/v1beta1\"",
            ],
        ),
        (
            "wrong kind",
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Other\n".to_owned(),
            vec!["line 2: kind: Unsupported value: \"Other\": supported values: \"Configuration\""],
        ),
        (
            "unknown field",
            v1beta2("waitForPodReady: {}\n"),
            vec!["line 3: waitForPodReady: unknown field \"waitForPodReady\""],
        ),
        (
            "v1beta1's enable in v1beta2",
            v1beta2(
                "fairSharing:\n  enable: true\n  preemptionStrategies: [LessThanInitialShare]\n",
            ),
            vec!["line 4: fairSharing.enable: unknown field \"fairSharing.enable\""],
        ),
        (
            "negative timeout",
            v1beta2("waitForPodsReady:\n  timeout: -1s\n"),
            vec![
                "line 4: waitForPodsReady.timeout: Invalid value: \"-1s\": must be greater than or equal to 0",
                "waitForPodsReady.recoveryTimeout: Invalid value: \"-1s\": must be greater than or equal to 0",
            ],
        ),
        (
            "negative recoveryTimeout",
            v1beta2("waitForPodsReady:\n  recoveryTimeout: -1s\n"),
            vec![
                "line 4: waitForPodsReady.recoveryTimeout: Invalid value: \"-1s\": must be greater than or equal to 0",
            ],
        ),
        (
            "unsupported requeuing timestamp",
            v1beta2("waitForPodsReady:\n  requeuingStrategy:\n    timestamp: Admission\n"),
            vec![
                "line 5: waitForPodsReady.requeuingStrategy.timestamp: Unsupported value: \"Admission\": supported values: \"Creation\", \"Eviction\"",
            ],
        ),
        (
            "negative backoff",
            v1beta2(
                "waitForPodsReady:\n  requeuingStrategy:\n    backoffLimitCount: -1\n    backoffBaseSeconds: -1\n    backoffMaxSeconds: -1\n",
            ),
            vec![
                "line 5: waitForPodsReady.requeuingStrategy.backoffLimitCount: Invalid value: -1: must be greater than or equal to 0",
                "line 6: waitForPodsReady.requeuingStrategy.backoffBaseSeconds: Invalid value: -1: must be greater than or equal to 0",
                "line 7: waitForPodsReady.requeuingStrategy.backoffMaxSeconds: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        (
            "fair sharing without strategies",
            v1beta2("fairSharing: {}\n"),
            vec!["line 3: fairSharing.preemptionStrategies: Required value: must be specified"],
        ),
        (
            "fair sharing strategies in the wrong order",
            v1beta2(
                "fairSharing:\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n",
            ),
            vec![
                "line 4: fairSharing.preemptionStrategies: Unsupported value: [\"LessThanInitialShare\",\"LessThanOrEqualToFinalShare\"]: supported values: \"LessThanOrEqualToFinalShare\", \"LessThanInitialShare\", \"LessThanOrEqualToFinalShare,LessThanInitialShare\"",
            ],
        ),
        (
            "admission fair sharing negatives",
            v1beta2(
                "admissionFairSharing:\n  usageHalfLifeTime: -1s\n  usageSamplingInterval: -1s\n  resourceWeights:\n    cpu: -1\n",
            ),
            vec![
                "line 4: admissionFairSharing.usageHalfLifeTime: Invalid value: \"-1s\": must be greater than or equal to 0",
                "line 5: admissionFairSharing.usageSamplingInterval: Invalid value: \"-1s\": must be greater than 0",
                "line 7: admissionFairSharing.resourceWeights[cpu]: Invalid value: -1.0: must be greater than or equal to 0",
            ],
        ),
        (
            "namespace selector matching kube-system and Kueue's namespace",
            v1beta2("managedJobsNamespaceSelector: {}\n"),
            vec![
                "line 3: managedJobsNamespaceSelector: Invalid value: {}: should not match the \"kube-system\" namespace",
                "line 3: managedJobsNamespaceSelector: Invalid value: {}: should not match the \"kueue-system\" namespace",
            ],
        ),
        (
            "malformed namespace selector",
            v1beta2(
                "managedJobsNamespaceSelector:\n  matchExpressions:\n  - key: team\n    operator: In\n",
            ),
            vec![
                "managedJobsNamespaceSelector.matchExpressions[0].values: Required value: must be specified",
            ],
        ),
        (
            "unknown and duplicate frameworks",
            v1beta2(
                "integrations:\n  frameworks:\n  - batch/job\n  - example.com/thing\n  - batch/job\n",
            ),
            vec![
                "line 6: integrations.frameworks[1]: Unsupported value: \"example.com/thing\"",
                "line 7: integrations.frameworks[2]: Duplicate value: \"batch/job\"",
            ],
        ),
        (
            "unknown nested field",
            v1beta2("waitForPodsReady:\n  timout: 5m\n"),
            vec!["line 3: waitForPodsReady: unknown field `timout`"],
        ),
        (
            "zero heads",
            v1beta2("beyondKueue:\n  headsPerClusterQueue: 0\n"),
            vec![
                "line 4: beyondKueue.headsPerClusterQueue: Invalid value: 0: must be greater than 0",
            ],
        ),
        (
            "topology-aware preemption that is not a boolean",
            v1beta2("beyondKueue:\n  topologyAwarePreemption: \"yes\"\n"),
            vec![
                "line 4: beyondKueue.topologyAwarePreemption: Invalid value: \"yes\": must be true or false",
            ],
        ),
    ];
    for (name, text, want) in cases {
        let errors = match parse(&text) {
            Err(ConfigError::Invalid(errors)) => errors,
            other => panic!("{name}: {other:?}"),
        };
        let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
        for (got, want) in got.iter().zip(&want) {
            assert!(got.starts_with(want), "{name}:\n got {got}\nwant {want}");
        }
    }
}

#[test]
fn not_yaml_is_a_syntax_error_with_its_line() {
    let error = parse("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: [Configuration\n");
    match error {
        Err(ConfigError::Syntax(message)) => assert!(message.contains("line"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse("- a\n").map_err(|e| e.to_string()),
        Err("(document): not a mapping".to_owned())
    );
}

fn resources(mappings: &str) -> String {
    v1beta2(&format!("resources:\n  deviceClassMappings:\n{mappings}"))
}

#[test]
fn device_class_mappings_are_read_in_both_versions() {
    let counter = resources(
        "  - name: nvidia.com/mig-memory\n    deviceClassNames: [mig.nvidia.com, gpu.nvidia.com]\n    sources:\n    - counter:\n        name: memorySlice\n        driver: gpu.nvidia.com\n        deviceSelector:\n          cel:\n            expression: \"device.driver == 'gpu.nvidia.com'\"\n",
    );
    let configuration = parsed(&counter);
    assert_eq!(
        configuration.device_class_mappings,
        vec![DeviceClassMapping {
            name: "nvidia.com/mig-memory".into(),
            device_class_names: vec!["mig.nvidia.com".into(), "gpu.nvidia.com".into()],
            counters: vec![CounterSource {
                name: "memorySlice".into(),
                driver: "gpu.nvidia.com".into(),
                device_selector: "device.driver == 'gpu.nvidia.com'".into(),
            }],
        }]
    );
    let old = v1beta1(
        "resources:\n  transformations: []\n  deviceClassMappings:\n  - name: whole-foo\n    deviceClassNames: [foo.com/device]\n",
    );
    let configuration = parsed(&old);
    assert_eq!(configuration.device_class_mappings.len(), 1);
    assert!(configuration.device_class_mappings[0].counters.is_empty());
    assert_eq!(configuration.ignored, vec!["resources.transformations"]);
    assert!(parsed(&v1beta2("")).device_class_mappings.is_empty());
}

// Upstream: TestValidateDeviceClassMappings and the counter/capacity source cases of
// TestValidate (pkg/config/validation_test.go), with Kueue's default feature gates.
#[test]
fn device_class_mappings_are_checked_as_kueue_checks_them() {
    let source = |body: &str| {
        resources(&format!(
            "  - name: gpu.memory\n    deviceClassNames: [mig.nvidia.com]\n    sources:\n{body}"
        ))
    };
    let nine: Vec<String> = (0..9).map(|i| format!("c{i}.example.com")).collect();
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "invalid resource name",
            resources("  - name: \"@invalid-name\"\n    deviceClassNames: [foo.com/device]\n"),
            vec![
                "line 5: resources.deviceClassMappings[0].name: Invalid value: \"@invalid-name\": name part must consist of alphanumeric characters",
            ],
        ),
        (
            "duplicate resource names",
            resources(
                "  - name: duplicate-name\n    deviceClassNames: [foo.com/device]\n  - name: duplicate-name\n    deviceClassNames: [bar.com/device]\n",
            ),
            vec![
                "line 7: resources.deviceClassMappings[1].name: Duplicate value: \"duplicate-name\"",
            ],
        ),
        (
            "empty device class names",
            resources("  - name: foo\n    deviceClassNames: []\n"),
            vec![
                "line 6: resources.deviceClassMappings[0].deviceClassNames: Required value: at least one device class name is required",
            ],
        ),
        (
            "too many device class names",
            resources(&format!(
                "  - name: foo\n    deviceClassNames: [{}]\n",
                nine.join(", ")
            )),
            vec![
                "line 6: resources.deviceClassMappings[0].deviceClassNames: Too many: 9: must have at most 8 items",
            ],
        ),
        (
            "device class in two mappings",
            resources(
                "  - name: a\n    deviceClassNames: [foo.com/device]\n  - name: b\n    deviceClassNames: [foo.com/device]\n",
            ),
            vec![
                "resources.deviceClassMappings[1].deviceClassNames[0]: Invalid value: \"foo.com/device\": device class already mapped to resource a",
            ],
        ),
        (
            "duplicate device class in one mapping",
            resources("  - name: a\n    deviceClassNames: [foo.com/device, foo.com/device]\n"),
            vec![
                "resources.deviceClassMappings[0].deviceClassNames[1]: Duplicate value: \"foo.com/device\"",
            ],
        ),
        (
            "counter source without driver and selector",
            source("    - counter:\n        name: memory\n"),
            vec![
                "resources.deviceClassMappings[0].sources[0].counter.driver: Required value",
                "resources.deviceClassMappings[0].sources[0].counter.deviceSelector.cel.expression: Required value",
            ],
        ),
        (
            "counter name neither a DNS label nor a C identifier",
            source(
                "    - counter:\n        name: Memory-Slice\n        driver: gpu.nvidia.com\n        deviceSelector: {cel: {expression: \"true\"}}\n",
            ),
            vec![
                "line 9: resources.deviceClassMappings[0].sources[0].counter.name: Invalid value: \"Memory-Slice\": a lowercase RFC 1123 label must consist of",
            ],
        ),
        (
            "counter driver not a DNS subdomain, selector not CEL",
            source(
                "    - counter:\n        name: memory\n        driver: GPU_driver\n        deviceSelector: {cel: {expression: \"device.driver ==\"}}\n",
            ),
            vec![
                "line 10: resources.deviceClassMappings[0].sources[0].counter.driver: Invalid value: \"GPU_driver\": a lowercase RFC 1123 subdomain",
                "resources.deviceClassMappings[0].sources[0].counter.deviceSelector.cel.expression: Invalid value: \"device.driver ==\": CEL compilation failed: ",
            ],
        ),
        (
            "a source of no kind",
            source("    - {}\n"),
            vec![
                "resources.deviceClassMappings[0].sources[0]: Required value: exactly one source type must be set per entry",
            ],
        ),
        (
            "a capacity source needs its feature gate",
            source(
                "    - capacity:\n        name: memory\n        driver: gpu.example.com\n        deviceSelector: {cel: {expression: \"true\"}}\n",
            ),
            vec![
                "resources.deviceClassMappings[0].sources[0].capacity: Invalid value: true: capacity sources require KueueDRAIntegrationConsumableCapacity to be enabled",
            ],
        ),
        (
            "counter and capacity in one mapping",
            source(
                "    - counter: {name: memory, driver: gpu.nvidia.com, deviceSelector: {cel: {expression: \"true\"}}}\n    - capacity: {name: memory, driver: gpu.nvidia.com, deviceSelector: {cel: {expression: \"true\"}}}\n",
            ),
            vec![
                "resources.deviceClassMappings[0].sources[1].capacity: Invalid value: true: capacity sources require",
                "resources.deviceClassMappings[0].sources: Invalid value: 2: cannot mix counter and capacity sources in the same mapping",
            ],
        ),
        (
            "v1beta1 has no sources",
            v1beta1(
                "resources:\n  deviceClassMappings:\n  - name: a\n    deviceClassNames: [foo.com/device]\n    sources: []\n",
            ),
            vec!["line 7: resources.deviceClassMappings[0].sources: unknown field"],
        ),
    ];
    for (name, text, want) in cases {
        let errors = match parse(&text) {
            Err(ConfigError::Invalid(errors)) => errors,
            other => panic!("{name}: {other:?}"),
        };
        let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
        for (got, want) in got.iter().zip(&want) {
            // Where the line is not asserted, it is left out of the comparison.
            let unlined = match got.split_once(": ") {
                Some((line, rest)) if line.starts_with("line ") && !want.starts_with("line ") => {
                    rest
                }
                _ => got.as_str(),
            };
            assert!(
                unlined.starts_with(want),
                "{name}:\n got {got}\nwant {want}"
            );
        }
    }
    // Two mappings of one DeviceClass counting different counters are fine.
    let two_counters = resources(
        "  - name: gpu.memory\n    deviceClassNames: [mig.nvidia.com]\n    sources:\n    - counter: {name: memorySlice, driver: gpu.nvidia.com, deviceSelector: {cel: {expression: \"true\"}}}\n  - name: gpu.compute\n    deviceClassNames: [mig.nvidia.com]\n    sources:\n    - counter: {name: computeSlices, driver: gpu.nvidia.com, deviceSelector: {cel: {expression: \"true\"}}}\n",
    );
    assert_eq!(parsed(&two_counters).device_class_mappings.len(), 2);
}

#[test]
fn the_shipped_dra_example_validates() {
    let text = include_str!("../../../../examples/queueing/kueue-dra-config.yaml");
    let mappings = parsed(text).device_class_mappings;
    let names: Vec<&str> = mappings.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["nvidia.com/gpu", "nvidia.com/mig-memory-slices"]);
    assert_eq!(mappings[1].counters[0].name, "memorySlice");
}

#[test]
fn multikueue_defaults_and_settings() {
    let cases = [
        ("absent", v1beta2(""), ("multikueue", 900)),
        (
            "set",
            v1beta2(
                "multiKueue:\n  origin: manager-a\n  workerLostTimeout: 2m\n  gcInterval: 1m\n",
            ),
            ("manager-a", 120),
        ),
    ];
    for (name, text, (origin, seconds)) in cases {
        let settings = parsed(&text).multi_kueue;
        assert_eq!(
            (settings.origin.as_str(), settings.worker_lost_timeout),
            (origin, Duration::from_secs(seconds)),
            "{name}"
        );
        assert!(
            !parsed(&text).ignored.contains(&"multiKueue".to_owned()),
            "{name}"
        );
    }
    assert!(parse(&v1beta2("multiKueue:\n  workerLostTimeout: soon\n")).is_err());
}

#[test]
fn feature_gates_set_scheduling_equivalence_hashing() {
    // (file body, SchedulingEquivalenceHashing): on by default as Kueue's beta gate; other
    // gates are accepted and change nothing here.
    let cases = [
        ("", true),
        ("featureGates:\n  TopologyAwareScheduling: true\n", true),
        (
            "featureGates:\n  SchedulingEquivalenceHashing: false\n",
            false,
        ),
        (
            "featureGates:\n  SchedulingEquivalenceHashing: true\n",
            true,
        ),
    ];
    for (body, want) in cases {
        let configuration = parsed(&v1beta2(body));
        assert_eq!(
            configuration.feature_gates.scheduling_equivalence_hashing, want,
            "{body}"
        );
        assert!(!configuration.ignored.contains(&"featureGates".to_owned()));
    }
    let Err(ConfigError::Invalid(errors)) = parse(&v1beta2(
        "featureGates:\n  SchedulingEquivalenceHashing: sometimes\n",
    )) else {
        panic!("a gate that is not a boolean is refused");
    };
    assert_eq!(errors[0].path, "featureGates");
}
