use super::*;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
}

#[test]
fn references_normalise_as_the_runtime_reads_them() {
    let digest = format!("sha256:{}", "a".repeat(64));
    let cases: Vec<(String, &str, &str, Option<&str>, bool)> = vec![
        (
            "nginx".into(),
            "docker.io",
            "library/nginx",
            Some("latest"),
            false,
        ),
        (
            "nginx:1.27".into(),
            "docker.io",
            "library/nginx",
            Some("1.27"),
            false,
        ),
        (
            "bitnami/redis:7".into(),
            "docker.io",
            "bitnami/redis",
            Some("7"),
            false,
        ),
        (
            "registry.k8s.io/pause:3.10".into(),
            "registry.k8s.io",
            "pause",
            Some("3.10"),
            false,
        ),
        (
            "localhost/app".into(),
            "localhost",
            "app",
            Some("latest"),
            false,
        ),
        (
            "reg.lab:5000/team/app:v2".into(),
            "reg.lab:5000",
            "team/app",
            Some("v2"),
            false,
        ),
        (
            format!("nvcr.io/nvidia/cuda@{digest}"),
            "nvcr.io",
            "nvidia/cuda",
            None,
            true,
        ),
        (
            format!("nginx:1.27@{digest}"),
            "docker.io",
            "library/nginx",
            Some("1.27"),
            true,
        ),
    ];
    for (image, registry, repository, tag, has_digest) in cases {
        let parsed = ImageRef::parse(&image).unwrap_or_else(|e| panic!("{image}: {e}"));
        assert_eq!(parsed.registry, registry, "{image}");
        assert_eq!(parsed.repository, repository, "{image}");
        assert_eq!(parsed.tag.as_deref(), tag, "{image}");
        assert_eq!(parsed.digest.is_some(), has_digest, "{image}");
    }
    assert_eq!(
        ImageRef::parse("nginx").map(|i| i.canonical()),
        Ok("docker.io/library/nginx:latest".to_string())
    );
    assert_eq!(
        ImageRef::parse("reg.lab:5000/team/app:v2").map(|i| i.short_name()),
        Ok("team/app:v2".to_string())
    );
}

#[test]
fn malformed_references_are_refused_naming_the_image() {
    for image in [
        "",
        "Nginx",
        "nginx:",
        "nginx:-x",
        "a b",
        "nginx@sha256:zz",
        "nginx@abc",
        "reg.lab//x",
    ] {
        let error = ImageRef::parse(image).expect_err(image);
        if !image.is_empty() {
            assert!(error.to_string().contains(&format!("{image:?}")), "{error}");
        }
    }
}

#[test]
fn pull_policy_defaults_as_the_api_server() {
    let digest = format!("sha256:{}", "b".repeat(64));
    let cases = [
        ("nginx".to_string(), PullPolicy::Always),
        ("nginx:latest".to_string(), PullPolicy::Always),
        ("nginx:1.27".to_string(), PullPolicy::IfNotPresent),
        ("reg.lab:5000/app".to_string(), PullPolicy::Always),
        (format!("nginx@{digest}"), PullPolicy::IfNotPresent),
    ];
    for (image, policy) in cases {
        assert_eq!(default_pull_policy(&image), policy, "{image}");
        assert_eq!(PullPolicy::parse(None, &image), Ok(policy), "{image}");
    }
    assert_eq!(
        PullPolicy::parse(Some("Never"), "nginx"),
        Ok(PullPolicy::Never)
    );
    assert!(
        PullPolicy::parse(Some("Sometimes"), "nginx")
            .unwrap_err()
            .contains("imagePullPolicy")
    );
}

#[test]
fn pulls_follow_the_policy_and_the_node_cache() {
    let cases = [
        (PullPolicy::Always, true, PullNeed::Pull),
        (PullPolicy::Always, false, PullNeed::Pull),
        (PullPolicy::IfNotPresent, true, PullNeed::Present),
        (PullPolicy::IfNotPresent, false, PullNeed::Pull),
        (PullPolicy::Never, true, PullNeed::Present),
        (PullPolicy::Never, false, PullNeed::NeverPull),
    ];
    for (policy, present, need) in cases {
        assert_eq!(pull_need(policy, present), need, "{policy:?} {present}");
    }
}

#[test]
fn messages_are_the_kubelets() {
    assert_eq!(pulling_message("nginx"), "Pulling image \"nginx\"");
    assert_eq!(
        pulled_message(
            "nginx",
            Duration::from_millis(1234),
            Duration::from_micros(1_234_900),
            4096
        ),
        "Successfully pulled image \"nginx\" in 1.234s (1.234s including waiting). Image size: 4096 bytes."
    );
    assert_eq!(
        present_message("nginx:1.27"),
        "Container image \"nginx:1.27\" already present on machine"
    );
    assert_eq!(
        never_pull_message("x"),
        "Container image \"x\" is not present with pull policy of Never"
    );
    assert_eq!(backoff_event_message("x"), "Back-off pulling image \"x\"");
    let error = PullError::NotFound {
        reference: "docker.io/library/x:latest".into(),
    };
    assert_eq!(
        failed_message("x", &error),
        format!("Failed to pull image \"x\": {}", error.message())
    );
    assert_eq!(
        backoff_waiting_message("x", Some(&error)),
        format!(
            "Back-off pulling image \"x\": ErrImagePull: {}",
            error.message()
        )
    );
    assert_eq!(
        container_error_message(ERR_IMAGE_PULL),
        "Error: ErrImagePull"
    );
}

#[test]
fn durations_read_as_go_writes_them() {
    let cases = [
        (Duration::ZERO, "0s"),
        (Duration::from_millis(52), "52ms"),
        (Duration::from_micros(1500), "1.5ms"),
        (Duration::from_millis(1200), "1.2s"),
        (Duration::from_secs(2), "2s"),
        (Duration::from_millis(65_500), "1m5.5s"),
        (Duration::from_secs(3725), "1h2m5s"),
    ];
    for (duration, text) in cases {
        assert_eq!(go_duration(duration), text);
    }
    assert_eq!(
        pull_duration(4 * 1024 * 1024, 200 * 1024 * 1024),
        Duration::from_millis(20)
    );
    assert_eq!(pull_duration(1, u64::MAX), Duration::from_millis(1));
    assert_eq!(pull_duration(10, 0), Duration::from_secs(10));
}

#[test]
fn backoff_doubles_to_the_maximum_and_expires() {
    let mut backoff = Backoff::new();
    let key = backoff_key("uid-1", "nginx");
    assert_eq!(key, "uid-1_nginx");
    assert!(!backoff.in_backoff(&key, at(0)));
    let steps = [10, 20, 40, 80, 160, 300, 300];
    let mut now = 0;
    for expected in steps {
        assert_eq!(backoff.next(&key, at(now)), Duration::from_secs(expected));
        assert!(backoff.in_backoff(&key, at(now + expected - 1)));
        assert!(!backoff.in_backoff(&key, at(now + expected)));
        now += expected;
    }
    assert_eq!(backoff.until(&key), Some(at(now - 300 + 300)));
    // No failure for more than twice the maximum: it starts over.
    assert_eq!(backoff.next(&key, at(now + 601)), INITIAL_BACKOFF);
    // Per pod and image.
    assert_eq!(backoff.next("uid-2_nginx", at(0)), INITIAL_BACKOFF);
    backoff.forget_pod("uid-1");
    assert_eq!(backoff.get(&key), Duration::ZERO);
    assert_eq!(backoff.get("uid-2_nginx"), INITIAL_BACKOFF);
    backoff.gc(at(10_000));
    assert_eq!(backoff.get("uid-2_nginx"), Duration::ZERO);
}

fn registry(auth: bool, images: &[(&str, u64)]) -> Registry {
    Registry {
        host: "registry.lab:5000".into(),
        auth,
        images: images.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
    }
}

/// An image, its registry, a fault, whether the pod has credentials, and the verdict.
type Case<'a> = (
    &'a ImageRef,
    Option<&'a Registry>,
    Option<RegistryFault>,
    bool,
    Result<u64, PullError>,
);

#[test]
fn registries_answer_pulls() {
    let private = registry(true, &[("team/app:v1", 1000)]);
    let public = registry(false, &[("team/app:v1", 1000)]);
    let open = registry(false, &[]);
    let app = ImageRef::parse("registry.lab:5000/team/app:v1").unwrap_or_else(|e| panic!("{e}"));
    let missing =
        ImageRef::parse("registry.lab:5000/team/app:v9").unwrap_or_else(|e| panic!("{e}"));
    let reference = app.canonical();
    let cases: Vec<Case<'_>> = vec![
        (&app, None, None, false, Ok(DEFAULT_IMAGE_SIZE)),
        (&app, Some(&open), None, false, Ok(DEFAULT_IMAGE_SIZE)),
        (&app, Some(&public), None, false, Ok(1000)),
        (&app, Some(&private), None, true, Ok(1000)),
        (
            &app,
            Some(&private),
            None,
            false,
            Err(PullError::Unauthorized {
                reference: reference.clone(),
            }),
        ),
        (
            &missing,
            Some(&public),
            None,
            false,
            Err(PullError::NotFound {
                reference: missing.canonical(),
            }),
        ),
        (
            &app,
            Some(&public),
            Some(RegistryFault::Unauthorized),
            true,
            Err(PullError::Unauthorized {
                reference: reference.clone(),
            }),
        ),
        (
            &app,
            None,
            Some(RegistryFault::Unreachable),
            false,
            Err(PullError::Unreachable {
                reference: reference.clone(),
                host: "registry.lab:5000".into(),
                repository: "team/app".into(),
                object: "v1".into(),
            }),
        ),
    ];
    for (image, registry, fault, credentials, expected) in cases {
        let verdict = pull_verdict(PullRequest {
            image,
            registry,
            fault,
            credentials,
        });
        assert_eq!(
            verdict, expected,
            "{image:?} {registry:?} {fault:?} {credentials}"
        );
    }
}

#[test]
fn pull_errors_read_as_containerd_reports_them() {
    let unreachable = PullError::Unreachable {
        reference: "registry.lab:5000/team/app:v1".into(),
        host: "registry.lab:5000".into(),
        repository: "team/app".into(),
        object: "v1".into(),
    };
    assert_eq!(
        unreachable.message(),
        "rpc error: code = Unknown desc = failed to pull and unpack image \"registry.lab:5000/team/app:v1\": failed to resolve reference \"registry.lab:5000/team/app:v1\": failed to do request: Head \"https://registry.lab:5000/v2/team/app/manifests/v1\": dial tcp: lookup registry.lab: i/o timeout"
    );
    let unauthorized = PullError::Unauthorized {
        reference: "r/x:1".into(),
    };
    assert!(
        unauthorized
            .message()
            .contains("pull access denied, repository does not exist or may require authorization")
    );
    let not_found = PullError::NotFound {
        reference: "r/x:1".into(),
    };
    assert!(not_found.message().ends_with("\"r/x:1\": r/x:1: not found"));
}

#[test]
fn pull_secret_keys_match_as_the_keyring() {
    let image = |s: &str| ImageRef::parse(s).unwrap_or_else(|e| panic!("{e}"));
    let cases = [
        ("registry.lab:5000", "registry.lab:5000/team/app:v1", true),
        (
            "https://registry.lab:5000",
            "registry.lab:5000/team/app",
            true,
        ),
        ("registry.lab", "registry.lab:5000/team/app", false),
        ("registry.lab:5000/team", "registry.lab:5000/team/app", true),
        (
            "registry.lab:5000/other",
            "registry.lab:5000/team/app",
            false,
        ),
        ("registry.lab:5000/te", "registry.lab:5000/team/app", false),
        ("*.lab:5000", "registry.lab:5000/team/app", true),
        ("*.example.com", "registry.lab:5000/team/app", false),
        ("https://index.docker.io/v1/", "nginx", true),
        ("docker.io", "acme/private", true),
        ("https://index.docker.io/v1/", "registry.lab/x", false),
        ("nvcr.io", "NVCR.IO/nvidia/cuda:12", true),
    ];
    for (key, reference, expected) in cases {
        assert_eq!(
            key_matches(key, &image(reference)),
            expected,
            "{key} {reference}"
        );
    }
}

#[test]
fn pull_secrets_hold_credentials_only_when_filled() {
    let app = ImageRef::parse("registry.lab:5000/team/app:v1").unwrap_or_else(|e| panic!("{e}"));
    let good = br#"{"auths":{"registry.lab:5000":{"username":"u","password":"p","auth":"dTpw"}}}"#
        .to_vec();
    let auth_only = br#"{"auths":{"registry.lab:5000":{"auth":"dTpw"}}}"#.to_vec();
    let empty = br#"{"auths":{"registry.lab:5000":{}}}"#.to_vec();
    let other = br#"{"auths":{"other.lab":{"auth":"dTpw"}}}"#.to_vec();
    let broken = b"not json".to_vec();
    assert!(secrets_have_credentials(std::slice::from_ref(&good), &app));
    assert!(secrets_have_credentials(
        std::slice::from_ref(&auth_only),
        &app
    ));
    assert!(!secrets_have_credentials(
        &[empty.clone(), other.clone()],
        &app
    ));
    assert!(secrets_have_credentials(&[broken.clone(), good], &app));
    assert!(!secrets_have_credentials(&[], &app));
    assert!(
        docker_config_keys(&broken)
            .unwrap_err()
            .to_string()
            .starts_with(".dockerconfigjson:")
    );
    assert_eq!(docker_config_keys(&empty), Ok(vec![]));
}

#[test]
fn registry_faults_parse() {
    assert_eq!(
        RegistryFault::parse("unreachable"),
        Ok(RegistryFault::Unreachable)
    );
    assert_eq!(
        RegistryFault::parse("unauthorized"),
        Ok(RegistryFault::Unauthorized)
    );
    assert!(
        RegistryFault::parse("slow")
            .unwrap_err()
            .contains("\"slow\"")
    );
}

#[test]
fn pools_pull_through_their_mirror_and_fall_back_to_the_registry() {
    let mut registries = Registries::default();
    registries.registries.insert(
        "mirror.lab".into(),
        Registry {
            host: "mirror.lab".into(),
            auth: false,
            images: [("library/nginx:1.27".to_string(), 777)].into(),
        },
    );
    registries.registries.insert(
        "registry.lab".into(),
        Registry {
            host: "registry.lab".into(),
            auth: true,
            images: BTreeMap::new(),
        },
    );
    registries.mirrors.insert("gpu".into(), "mirror.lab".into());
    registries.bandwidth.insert("gpu".into(), 1000);
    let image = |s: &str| ImageRef::parse(s).unwrap_or_else(|e| panic!("{e}"));
    let none = BTreeMap::new();
    let anonymous = |_: &ImageRef| false;
    let nginx = image("nginx:1.27");
    assert_eq!(
        registries.pull("gpu", &nginx, &none, &anonymous),
        Ok(("mirror.lab".to_string(), 777))
    );
    // Pools without a mirror pull from the registry (unknown: any image, default size).
    assert_eq!(
        registries.pull("cpu", &nginx, &none, &anonymous),
        Ok(("docker.io".to_string(), DEFAULT_IMAGE_SIZE))
    );
    // The mirror lacks it or is down: the registry itself.
    let redis = image("redis:7");
    assert_eq!(
        registries.pull("gpu", &redis, &none, &anonymous),
        Ok(("docker.io".to_string(), DEFAULT_IMAGE_SIZE))
    );
    let down: BTreeMap<String, RegistryFault> =
        [("mirror.lab".to_string(), RegistryFault::Unreachable)].into();
    assert_eq!(
        registries.pull("gpu", &nginx, &down, &anonymous),
        Ok(("docker.io".to_string(), DEFAULT_IMAGE_SIZE))
    );
    // Both fail: the registry's error.
    let private = image("registry.lab/team/app:v1");
    assert_eq!(
        registries.pull("gpu", &private, &none, &anonymous),
        Err(PullError::Unauthorized {
            reference: "registry.lab/team/app:v1".into()
        })
    );
    let keyed = |i: &ImageRef| i.registry == "registry.lab";
    assert_eq!(
        registries.pull("gpu", &private, &none, &keyed),
        Ok(("registry.lab".to_string(), DEFAULT_IMAGE_SIZE))
    );
    assert_eq!(registries.bandwidth("gpu"), 1000);
    assert_eq!(registries.bandwidth("cpu"), DEFAULT_BANDWIDTH);
}

#[test]
fn registry_faults_read_from_node_annotations() {
    assert_eq!(
        registry_fault_key("registry.lab:5000"),
        "fault.tessera.dev/registry-registry.lab_5000"
    );
    let annotations: BTreeMap<String, String> = [
        (
            registry_fault_key("registry.lab:5000"),
            "unreachable".to_string(),
        ),
        (registry_fault_key("docker.io"), "unauthorized".to_string()),
        (registry_fault_key("bad.lab"), "slow".to_string()),
        ("fault.tessera.dev/nvlink".to_string(), "down".to_string()),
    ]
    .into();
    let (faults, problems) = registry_faults(&annotations);
    assert_eq!(
        faults,
        [
            ("docker.io".to_string(), RegistryFault::Unauthorized),
            ("registry.lab:5000".to_string(), RegistryFault::Unreachable),
        ]
        .into()
    );
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with("fault.tessera.dev/registry-bad.lab: "),
        "{problems:?}"
    );
    assert_eq!(RegistryFault::Unreachable.as_str(), "unreachable");
}

#[test]
fn a_failed_image_step_shows_on_its_container() {
    let status = serde_json::json!({"status": {"containerStatuses": [
        {"name": "a", "state": {"waiting": {"reason": "ContainerCreating"}}},
        {"name": "b", "state": {"waiting": {"reason": "ContainerCreating"}}},
    ]}});
    let status = with_waiting(status, "b", ERR_IMAGE_PULL, "boom");
    assert_eq!(
        status["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    assert_eq!(
        status["status"]["containerStatuses"][1]["state"],
        serde_json::json!({"waiting": {"reason": "ErrImagePull", "message": "boom"}})
    );
    let digest = format!("sha256:{}", "c".repeat(64));
    let image = ImageRef::parse(&format!("nginx:1.27@{digest}")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        node_image(&image, 9),
        serde_json::json!({"names": [
            format!("docker.io/library/nginx:1.27@{digest}"),
            format!("docker.io/library/nginx@{digest}"),
        ], "sizeBytes": 9})
    );
}

#[test]
fn node_images_merge_models_and_pulled_images_largest_first() {
    let model = serde_json::json!({"names": ["model:lab/tiny@main"], "sizeBytes": 500});
    let small = serde_json::json!({"names": ["docker.io/library/a:1"], "sizeBytes": 10});
    let big = serde_json::json!({"names": ["docker.io/library/b:1"], "sizeBytes": 900});
    let tie = serde_json::json!({"names": ["docker.io/library/0:1"], "sizeBytes": 10});
    assert_eq!(
        merged_node_images(
            vec![model.clone()],
            vec![small.clone(), big.clone(), tie.clone()]
        ),
        serde_json::json!([big, model, tie, small])
    );
    assert_eq!(merged_node_images(vec![], vec![]), serde_json::json!([]));
}
