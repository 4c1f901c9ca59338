//! Pod Security admission as kubectl sees it: a namespace labelled `enforce=restricted`
//! refuses a privileged pod with upstream's message, `enforce=baseline` + `warn=restricted`
//! admits a baseline pod and kubectl prints upstream's `Warning:` line, labelling a namespace
//! with running violators warns about them, unlabelled namespaces stay privileged, and an
//! exemption from `--admission-control-config-file` admits what the labels would refuse; a bad
//! configuration file stops start-up naming the file, line and field.

use crate::support::{Cluster, outcome, up_refuses};

/// A pod manifest with one container `c` and the given container `securityContext` lines.
fn pod(name: &str, security_context: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations:\n    sim.tessera.dev/duration: 1h\nspec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause\n{security_context}"
    )
}

fn privileged() -> String {
    pod("priv", "    securityContext:\n      privileged: true\n")
}

fn baseline() -> String {
    pod("web", "")
}

const REFUSED: &str = concat!(
    r#"pods "priv" is forbidden: violates PodSecurity "restricted:latest": "#,
    r#"privileged (container "c" must not set securityContext.privileged=true), "#,
    r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
    r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
    r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
    r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
);

const WARNED: &str = concat!(
    r#"Warning: would violate PodSecurity "restricted:latest": "#,
    r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
    r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
    r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
    r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#
);

fn labelled_namespace(cluster: &Cluster, kubectl: &str, name: &str, labels: &[&str]) {
    cluster.ok(kubectl, &["create", "namespace", name]);
    let mut args = vec!["label", "namespace", name];
    args.extend(labels);
    cluster.ok(kubectl, &args);
}

#[test]
fn namespaces_enforce_and_warn_with_upstreams_messages() {
    let cluster = Cluster::start();
    for kubectl in ["1.33", "1.27"] {
        let version = kubectl.replace('.', "-");
        let locked = format!("locked-{version}");
        labelled_namespace(
            &cluster,
            kubectl,
            &locked,
            &["pod-security.kubernetes.io/enforce=restricted"],
        );
        let stderr = cluster.fails(
            kubectl,
            &["create", "-n", &locked, "-f", "-"],
            Some(&privileged()),
        );
        assert!(
            stderr.contains("Error from server (Forbidden)"),
            "{kubectl}: {stderr}"
        );
        assert!(stderr.contains(REFUSED), "{kubectl}: {stderr}");
        // A Deployment's template is only warned about (its pods are what enforce refuses).
        let (ok, _, stderr) = outcome(cluster.kubectl(
            kubectl,
            &[
                "create",
                "deployment",
                "web",
                "--image=registry.k8s.io/pause",
                "-n",
                &locked,
            ],
        ));
        assert!(ok, "{kubectl}: {stderr}");
        assert!(
            stderr.contains(r#"Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "pause" must set securityContext.allowPrivilegeEscalation=false)"#),
            "{kubectl}: {stderr}"
        );

        let team = format!("team-{version}");
        labelled_namespace(
            &cluster,
            kubectl,
            &team,
            &[
                "pod-security.kubernetes.io/enforce=baseline",
                "pod-security.kubernetes.io/warn=restricted",
            ],
        );
        let (ok, stdout, stderr) = outcome(cluster.kubectl_with_stdin(
            kubectl,
            &["create", "-n", &team, "-f", "-"],
            Some(&baseline()),
        ));
        assert!(ok, "{kubectl}: {stderr}");
        assert!(stdout.contains("pod/web created"), "{kubectl}: {stdout}");
        assert!(stderr.lines().any(|l| l == WARNED), "{kubectl}: {stderr}");
        // Baseline still refuses the privileged pod, naming baseline's one violation.
        let stderr = cluster.fails(
            kubectl,
            &["create", "-n", &team, "-f", "-"],
            Some(&privileged()),
        );
        assert!(
            stderr.contains(r#"pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#),
            "{kubectl}: {stderr}"
        );
    }
    // Unlabelled namespaces (the platform's own among them) are privileged: no refusal, no
    // warning; labelling one with running violators warns about them.
    let open = "open";
    cluster.ok("1.33", &["create", "namespace", open]);
    let (ok, _, stderr) = outcome(cluster.kubectl_with_stdin(
        "1.33",
        &["create", "-n", open, "-f", "-"],
        Some(&privileged()),
    ));
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("Warning"), "{stderr}");
    let (ok, _, stderr) = outcome(cluster.kubectl(
        "1.33",
        &[
            "label",
            "namespace",
            open,
            "pod-security.kubernetes.io/enforce=baseline",
        ],
    ));
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains(r#"Warning: existing pods in namespace "open" violate the new PodSecurity enforce level "baseline:latest""#),
        "{stderr}"
    );
    assert!(stderr.contains("Warning: priv: privileged"), "{stderr}");
}

#[test]
fn exemptions_come_from_the_admission_configuration_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let admission = dir.path().join("admission.yaml");
    std::fs::write(
        &admission,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: podsecurity.yaml\n",
    )
    .expect("write admission configuration");
    std::fs::write(
        dir.path().join("podsecurity.yaml"),
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: baseline\nexemptions:\n  namespaces: [ops]\n",
    )
    .expect("write pod security configuration");
    let path = admission.to_string_lossy().into_owned();
    let cluster = Cluster::start_with_args(&["--admission-control-config-file", &path]);
    // The default is baseline now: an unlabelled namespace refuses the privileged pod.
    cluster.ok("1.33", &["create", "namespace", "apps"]);
    let stderr = cluster.fails(
        "1.33",
        &["create", "-n", "apps", "-f", "-"],
        Some(&privileged()),
    );
    assert!(
        stderr.contains(r#"violates PodSecurity "baseline:latest": privileged"#),
        "{stderr}"
    );
    // The exempt namespace admits it despite its label, and says so when labelled.
    cluster.ok("1.33", &["create", "namespace", "ops"]);
    let (ok, _, stderr) = outcome(cluster.kubectl(
        "1.33",
        &[
            "label",
            "namespace",
            "ops",
            "pod-security.kubernetes.io/enforce=restricted",
        ],
    ));
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains(r#"Warning: namespace "ops" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored"#),
        "{stderr}"
    );
    let (ok, stdout, stderr) = outcome(cluster.kubectl_with_stdin(
        "1.33",
        &["create", "-n", "ops", "-f", "-"],
        Some(&privileged()),
    ));
    assert!(ok, "{stderr}");
    assert!(stdout.contains("pod/priv created"), "{stdout}");
}

#[test]
fn a_bad_admission_configuration_stops_start_up_naming_the_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("admission.yaml");
    let text = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults:\n      enforce: strict\n";
    std::fs::write(&config, text).expect("write the configuration");
    let stderr = up_refuses(
        &dir.path().join("data"),
        &["--admission-control-config-file", &config.to_string_lossy()],
    );
    assert!(
        stderr.contains(&format!(
            "{}:9: plugins[0].configuration.defaults.enforce: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
            config.display()
        )),
        "{stderr}"
    );
    assert!(!dir.path().join("data").join("kubeconfig").exists());
}
