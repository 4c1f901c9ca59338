//! Image pulls on the node twins end to end, with the bundled kubectl 1.33 and 1.27: a private
//! image without a pull secret fails with ErrImagePull, then ImagePullBackOff (the STATUS
//! column, `kubectl describe`'s events with the kubelet's and containerd's messages), as with a
//! pull secret that does not exist (`FailedToRetrieveImagePullSecret`); with a
//! `kubectl create secret docker-registry` secret a new pod pulls it (`Pulling`, `Pulled` with
//! its size) and runs; an `IfNotPresent` pod on the same node finds it cached ("already
//! present on machine") and the node lists it in `status.images`; `tessera fault registry`
//! makes pulls fail as an unreachable registry does until it is cleared, and the pod then runs
//! after its back-off; the pool's registry mirror serves the images it holds.

use std::time::Duration;

use crate::support::{Cluster, table_rows};

const REGISTRY: &str = "registry.lab:5000";

/// One node, so every pod shares its image cache, and a private registry.
const TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  registryBandwidth: 100Mi
  registryMirror: mirror.lab
registries:
- host: registry.lab:5000
  auth: true
  images: {team/app:v1: 2Mi, team/app:v2: 3Mi, team/app:v3: 1Mi}
- host: mirror.lab
  images: {library/nginx:1.27: 5Mi}
"#;

fn pod(name: &str, image: &str, secret: Option<&str>, policy: Option<&str>) -> String {
    let secrets = secret
        .map(|s| format!("  imagePullSecrets: [{{name: {s}}}]\n"))
        .unwrap_or_default();
    let policy = policy
        .map(|p| format!("    imagePullPolicy: {p}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{secrets}  containers:\n  - name: app\n    image: {image}\n{policy}    resources: {{requests: {{cpu: 100m}}}}\n"
    )
}

/// The pod's STATUS column in `kubectl get pod`.
fn status_column(cluster: &Cluster, version: &str, name: &str) -> String {
    let table = cluster.ok(version, &["get", "pod", name]);
    let rows = table_rows(&table);
    let column = rows[0].iter().position(|c| *c == "STATUS").expect("STATUS");
    rows.get(1)
        .and_then(|r| r.get(column))
        .map(|s| s.to_string())
        .unwrap_or_default()
}

fn wait_for_status(cluster: &Cluster, version: &str, name: &str, want: &str, within: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(within);
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        last = status_column(cluster, version, name);
        if last == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{version}: pod {name} never showed {want}; last {last}");
}

/// The reason and message of each event about a pod, one per line.
fn events_of(cluster: &Cluster, version: &str, pod: &str) -> String {
    cluster.ok(
        version,
        &[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={pod}"),
            "-o",
            "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}",
        ],
    )
}

#[test]
fn image_pulls_fail_back_off_use_pull_secrets_cache_and_recover() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 1);
    for (version, tag, size) in [
        ("1.33", "v1", 2 * 1024 * 1024),
        ("1.27", "v2", 3 * 1024 * 1024),
    ] {
        let v = version.replace('.', "");
        let image = format!("{REGISTRY}/team/app:{tag}");

        // No pull secret: ErrImagePull, then ImagePullBackOff.
        let denied = format!("denied-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&denied, &image, None, None),
        );
        wait_for_status(&cluster, version, &denied, "ErrImagePull", 20);
        wait_for_status(&cluster, version, &denied, "ImagePullBackOff", 20);
        let waiting = cluster.ok(
            version,
            &[
                "get",
                "pod",
                &denied,
                "-o",
                "jsonpath={.status.containerStatuses[0].state.waiting.message}",
            ],
        );
        assert!(
            waiting.starts_with(&format!(
                "Back-off pulling image \"{image}\": ErrImagePull: rpc error: code = Unknown desc = failed to pull and unpack image \"{image}\""
            )) && waiting.contains("pull access denied"),
            "{version}: {waiting}"
        );
        let described = cluster.ok(version, &["describe", "pod", &denied]);
        for line in [
            format!("Pulling image \"{image}\""),
            format!("Failed to pull image \"{image}\": rpc error: code = Unknown desc"),
            "Error: ErrImagePull".to_string(),
            format!("Back-off pulling image \"{image}\""),
            "Error: ImagePullBackOff".to_string(),
        ] {
            assert!(
                described.contains(&line),
                "{version}: {line} in {described}"
            );
        }

        // A pull secret that does not exist: the kubelet's warning, and the pull is denied.
        let missing = format!("missing-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&missing, &image, Some("nope"), None),
        );
        wait_for_status(&cluster, version, &missing, "ErrImagePull", 20);
        let events = events_of(&cluster, version, &missing);
        assert!(
            events.contains(
                "Warning FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (nope); attempting to pull the image may not succeed."
            ),
            "{version}: {events}"
        );

        // A docker-registry secret for the registry: a new pod pulls the image and runs.
        let secret = format!("regcred-{v}");
        cluster.ok(
            version,
            &[
                "create",
                "secret",
                "docker-registry",
                &secret,
                &format!("--docker-server={REGISTRY}"),
                "--docker-username=lab",
                "--docker-password=s3cret",
            ],
        );
        let allowed = format!("allowed-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&allowed, &image, Some(&secret), None),
        );
        cluster.node_when_running(version, None, &allowed);
        let events = events_of(&cluster, version, &allowed);
        assert!(
            events.contains(&format!("Normal Pulling: Pulling image \"{image}\""))
                && events.contains(&format!(
                    "Normal Pulled: Successfully pulled image \"{image}\" in "
                ))
                && events.contains(&format!(" including waiting). Image size: {size} bytes.")),
            "{version}: {events}"
        );
        let describe = cluster.ok(version, &["describe", "pod", &allowed]);
        assert!(
            describe.contains("Started container app"),
            "{version}: {describe}"
        );

        // IfNotPresent on the same node: the cached image.
        let cached = format!("cached-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&cached, &image, None, Some("IfNotPresent")),
        );
        cluster.node_when_running(version, None, &cached);
        let events = events_of(&cluster, version, &cached);
        assert!(
            events.contains(&format!(
                "Normal Pulled: Container image \"{image}\" already present on machine"
            )) && !events.contains("Pulling"),
            "{version}: {events}"
        );
        let images = cluster.ok(
            version,
            &[
                "get",
                "node",
                "cpu-1",
                "-o",
                "jsonpath={range .status.images[*]}{.names[0]}={.sizeBytes}{\"\\n\"}{end}",
            ],
        );
        assert!(
            images.lines().any(|l| l == format!("{image}={size}")),
            "{version}: {images}"
        );
    }

    // An unreachable registry: pulls fail with the runtime's message until it is cleared.
    let faulted = cluster.tessera(&["fault", "registry", REGISTRY, "--kind", "unreachable"]);
    assert!(faulted.status.success(), "{faulted:?}");
    assert_eq!(
        String::from_utf8_lossy(&faulted.stdout),
        format!("pulls from {REGISTRY} fail (unreachable) on 1 node(s)\n")
    );
    cluster.wait_for_node(
        "cpu-1",
        "{.metadata.annotations.fault\\.tessera\\.dev/registry-registry\\.lab_5000}",
        "unreachable",
    );
    let image = format!("{REGISTRY}/team/app:v3");
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &pod("down", &image, Some("regcred-133"), None),
    );
    wait_for_status(&cluster, "1.33", "down", "ErrImagePull", 20);
    let waiting = cluster.ok(
        "1.33",
        &[
            "get",
            "pod",
            "down",
            "-o",
            "jsonpath={.status.containerStatuses[0].state.waiting.message}",
        ],
    );
    assert!(
        waiting.contains(&format!(
            "failed to do request: Head \"https://{REGISTRY}/v2/team/app/manifests/v3\": dial tcp: lookup registry.lab: i/o timeout"
        )),
        "{waiting}"
    );
    wait_for_status(&cluster, "1.33", "down", "ImagePullBackOff", 20);
    let cleared = cluster.tessera(&["fault", "registry", REGISTRY, "--clear"]);
    assert!(cleared.status.success(), "{cleared:?}");
    // The next try after the back-off (10 s, then 20 s) pulls it.
    cluster.wait_for_within(
        "1.33",
        &["get", "pod", "down", "-o", "jsonpath={.status.phase}"],
        Duration::from_secs(60),
        |phase| phase == "Running",
    );
    let events = events_of(&cluster, "1.33", "down");
    assert!(
        events.contains(&format!(
            "Normal Pulled: Successfully pulled image \"{image}\" in "
        )),
        "{events}"
    );
    // The pool's mirror serves what it holds (its size, not the default 4 MiB of an
    // undeclared registry).
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &pod("mirrored", "nginx:1.27", None, None),
    );
    cluster.node_when_running("1.33", None, "mirrored");
    let events = events_of(&cluster, "1.33", "mirrored");
    assert!(
        events.contains("Normal Pulled: Successfully pulled image \"nginx:1.27\" in ")
            && events.contains("Image size: 5242880 bytes."),
        "{events}"
    );
    // A host that is no registry host is refused.
    let refused = cluster.tessera(&["fault", "registry", "not a host"]);
    assert!(!refused.status.success());
}
