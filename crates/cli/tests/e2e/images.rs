//! Image pulls on the node twins end to end, with the bundled kubectl 1.33 and 1.27: a private
//! image without a pull secret fails with ErrImagePull, then ImagePullBackOff (the STATUS
//! column, `kubectl describe`'s events with the kubelet's and containerd's messages), as with a
//! pull secret that does not exist (`FailedToRetrieveImagePullSecret`); with a
//! `kubectl create secret docker-registry` secret a new pod pulls it (`Pulling`, `Pulled` with
//! its size) and runs; an `IfNotPresent` pod on the same node finds it cached ("already
//! present on machine") and the node lists it in `status.images`; `tessera fault registry`
//! makes pulls fail as an unreachable registry does until it is cleared, and the pod then runs
//! after its back-off; the pool's registry mirror serves the images it holds.
//!
//! The platform's own registry: an image pushed with a real client (Python's `requests`:
//! monolithic and chunked blob uploads, the manifest, the spec's errors) is pulled by pods with
//! the pull secret the platform writes and runs, an unknown tag fails as containerd reports
//! it; an ingress NetworkPolicy on `tessera-system` that does not admit the nodes makes pulls
//! time out on the Service's address until it is lifted; a tenant created with `--registry`
//! reaches the registry from its pods and nothing else the bundle does not allow.

use std::time::Duration;

use crate::support::{Cluster, outcome, python, table_rows};

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

/// Pushes `team/app:v1` (a config pushed in one POST, a 2 MiB layer in two PATCH chunks, an
/// OCI manifest) with `requests`, checks the spec's answers, and prints the image's size.
const PUSH: &str = r#"
import hashlib, json, sys
import requests

endpoint, user, password = sys.argv[1:4]
OCI = "application/vnd.oci.image.manifest.v1+json"
s = requests.Session()
s.auth = (user, password)
def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()
def code(r):
    return r.json()["errors"][0]["code"]

anonymous = requests.get(endpoint + "/v2/")
assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"].startswith("Basic"), anonymous.headers
assert s.get(endpoint + "/v2/").status_code == 200

config = json.dumps({"architecture": "amd64", "os": "linux",
                     "rootfs": {"type": "layers", "diff_ids": []}}).encode()
layer = bytes(range(256)) * 8192
r = s.post(endpoint + "/v2/team/app/blobs/uploads/", params={"digest": digest(config)},
           data=config, headers={"Content-Type": "application/octet-stream"})
assert r.status_code == 201, r.text
r = s.post(endpoint + "/v2/team/app/blobs/uploads/")
assert r.status_code == 202, r.text
half = len(layer) // 2
r = s.patch(endpoint + r.headers["Location"], data=layer[:half],
            headers={"Content-Range": "0-%d" % (half - 1), "Content-Type": "application/octet-stream"})
assert r.status_code == 202 and r.headers["Range"] == "0-%d" % (half - 1), r.headers
r = s.patch(endpoint + r.headers["Location"], data=layer[half:],
            headers={"Content-Range": "%d-%d" % (half, len(layer) - 1), "Content-Type": "application/octet-stream"})
assert r.status_code == 202, r.text
r = s.put(endpoint + r.headers["Location"], params={"digest": digest(layer)})
assert r.status_code == 201 and r.headers["Docker-Content-Digest"] == digest(layer), r.text

manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI,
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(layer), "size": len(layer)}]}).encode()
r = s.put(endpoint + "/v2/team/app/manifests/" + digest(b"x"), data=manifest, headers={"Content-Type": OCI})
assert r.status_code == 400 and code(r) == "DIGEST_INVALID", r.text
r = s.put(endpoint + "/v2/team/app/manifests/v1", data=manifest, headers={"Content-Type": OCI})
assert r.status_code == 201 and r.headers["Docker-Content-Digest"] == digest(manifest), r.text
r = s.get(endpoint + "/v2/team/app/manifests/v1", headers={"Accept": OCI})
assert r.status_code == 200 and r.content == manifest, r.text
assert r.headers["Content-Type"] == OCI and r.headers["Docker-Content-Digest"] == digest(manifest)
r = s.head(endpoint + "/v2/team/app/blobs/" + digest(layer))
assert r.status_code == 200 and int(r.headers["Content-Length"]) == len(layer)
for path, status, want in [
    ("/v2/team/app/manifests/v9", 404, "MANIFEST_UNKNOWN"),
    ("/v2/team/none/tags/list", 404, "NAME_UNKNOWN"),
    ("/v2/team/app/blobs/" + digest(b"none"), 404, "BLOB_UNKNOWN"),
    ("/v2/team/app/blobs/sha256:xyz", 400, "DIGEST_INVALID"),
]:
    r = s.get(endpoint + path)
    assert r.status_code == status and code(r) == want, (path, r.status_code, r.text)
assert s.get(endpoint + "/v2/team/app/tags/list").json() == {"name": "team/app", "tags": ["v1"]}
print(len(config) + len(layer))
"#;

/// One node, no declared registries: images come from the platform's registry.
const ONE_NODE: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  registryBandwidth: 100Mi
"#;

const PLATFORM: &str = "registry.tessera-system.svc:5000";

/// An ingress policy on the registry's namespace that admits every pod and no node.
const PODS_ONLY: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: pods-only, namespace: tessera-system}
spec:
  podSelector: {}
  policyTypes: [Ingress]
  ingress:
  - from: [{namespaceSelector: {}}]
"#;

fn waiting_message(cluster: &Cluster, version: &str, pod: &str) -> String {
    cluster.ok(
        version,
        &[
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.status.containerStatuses[0].state.waiting.message}",
        ],
    )
}

/// `kubectl exec` agnhost's `connect` from the probe of `namespace`: `connected` or its
/// verdict.
fn connect(cluster: &Cluster, namespace: &str, target: &str) -> String {
    let (ok, stdout, stderr) = outcome(cluster.kubectl(
        "1.33",
        &[
            "exec",
            "-n",
            namespace,
            "probe",
            "--",
            "/agnhost",
            "connect",
            target,
            "--timeout=1s",
        ],
    ));
    if ok {
        "connected".into()
    } else {
        format!("{stdout}{stderr}")
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }
}

#[test]
fn the_platform_registry_takes_pushes_serves_pulls_and_answers_to_network_policy() {
    let cluster = Cluster::start_with_topology(ONE_NODE, 1);
    let dir = cluster
        .kubeconfig()
        .parent()
        .expect("data dir")
        .to_path_buf();
    let env = std::fs::read_to_string(dir.join("registry.env")).expect("registry.env");
    let value = |key: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} in {env}"))
            .to_string()
    };
    assert_eq!(value("REGISTRY_HOST"), PLATFORM);
    let pushed = python(&[
        "-c",
        PUSH,
        &value("REGISTRY_ENDPOINT"),
        &value("REGISTRY_USERNAME"),
        &value("REGISTRY_PASSWORD"),
    ]);
    let size = String::from_utf8_lossy(&pushed).trim().to_string();
    // The platform publishes how to reach it.
    let published = cluster.ok(
        "1.33",
        &[
            "get",
            "configmap",
            "registry",
            "-n",
            "tessera-system",
            "-o",
            "jsonpath={.data.host} {.data.pullSecret}",
        ],
    );
    assert_eq!(published, format!("{PLATFORM} registry-pull"));
    let service_ip = cluster.ok(
        "1.33",
        &[
            "get",
            "service",
            "registry",
            "-n",
            "tessera-system",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    let auth_file = dir.join("registry-auth.json");
    let auth_file = auth_file.to_str().expect("utf-8 path");
    let image = format!("{PLATFORM}/team/app:v1");

    for version in ["1.33", "1.27"] {
        let v = version.replace('.', "");
        let secret = format!("platform-{v}");
        cluster.ok(
            version,
            &[
                "create",
                "secret",
                "generic",
                &secret,
                "--type=kubernetes.io/dockerconfigjson",
                &format!("--from-file=.dockerconfigjson={auth_file}"),
            ],
        );
        // The pushed image runs, its size the manifest's.
        let app = format!("app-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&app, &image, Some(&secret), Some("Always")),
        );
        cluster.node_when_running(version, None, &app);
        let events = events_of(&cluster, version, &app);
        assert!(
            events.contains(&format!(
                "Normal Pulled: Successfully pulled image \"{image}\" in "
            )) && events.contains(&format!("Image size: {size} bytes.")),
            "{version}: {events}"
        );
        // A tag the registry does not have.
        let unknown = format!("unknown-{v}");
        let missing = format!("{PLATFORM}/team/app:v9");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&unknown, &missing, Some(&secret), None),
        );
        wait_for_status(&cluster, version, &unknown, "ErrImagePull", 20);
        let waiting = waiting_message(&cluster, version, &unknown);
        assert!(
            waiting
                .starts_with("rpc error: code = NotFound desc = failed to pull and unpack image")
                && waiting.ends_with(&format!("\"{missing}\": {missing}: not found")),
            "{version}: {waiting}"
        );
        // Without the pull secret the registry wants credentials.
        let anonymous = format!("anonymous-{v}");
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(&anonymous, &image, None, Some("Always")),
        );
        wait_for_status(&cluster, version, &anonymous, "ErrImagePull", 20);
        assert!(
            waiting_message(&cluster, version, &anonymous).contains("pull access denied"),
            "{version}"
        );
    }

    // A policy admitting pods but not the nodes: the kubelet's pull times out on the
    // Service's address, then backs off; lifting it lets the next try pull.
    cluster.ok_stdin("1.33", &["apply", "-f", "-"], PODS_ONLY);
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &pod("blocked", &image, Some("platform-133"), Some("Always")),
    );
    wait_for_status(&cluster, "1.33", "blocked", "ErrImagePull", 20);
    let waiting = waiting_message(&cluster, "1.33", "blocked");
    assert!(
        waiting.contains(&format!(
            "failed to do request: Head \"http://{PLATFORM}/v2/team/app/manifests/v1\": dial tcp {service_ip}:5000: i/o timeout"
        )),
        "{waiting}"
    );
    wait_for_status(&cluster, "1.33", "blocked", "ImagePullBackOff", 20);
    cluster.ok(
        "1.33",
        &[
            "delete",
            "networkpolicy",
            "pods-only",
            "-n",
            "tessera-system",
        ],
    );
    cluster.wait_for_within(
        "1.33",
        &["get", "pod", "blocked", "-o", "jsonpath={.status.phase}"],
        Duration::from_secs(60),
        |phase| phase == "Running",
    );

    // Tenants: one allowed to the registry, one not; the allowed one reaches nothing else.
    let allowed = cluster.tessera(&["tenant", "create", "builders", "--registry"]);
    assert!(allowed.status.success(), "{allowed:?}");
    let plain = cluster.tessera(&["tenant", "create", "others"]);
    assert!(plain.status.success(), "{plain:?}");
    let probe =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tenant/probe.yaml");
    let probe = probe.to_str().expect("utf-8 path");
    for namespace in ["builders", "others", "default"] {
        cluster.ok("1.33", &["apply", "-n", namespace, "-f", probe]);
    }
    for namespace in ["builders", "others", "default"] {
        cluster.node_when_running("1.33", Some(namespace), "probe");
    }
    let policies = cluster.ok(
        "1.33",
        &["get", "networkpolicy", "-n", "builders", "-o", "name"],
    );
    assert!(
        policies
            .lines()
            .any(|l| l == "networkpolicy.networking.k8s.io/allow-registry"),
        "{policies}"
    );
    let elsewhere = format!(
        "{}:8080",
        cluster.ok(
            "1.33",
            &["get", "pod", "probe", "-o", "jsonpath={.status.podIP}"]
        )
    );
    assert_eq!(connect(&cluster, "builders", PLATFORM), "connected");
    assert_eq!(connect(&cluster, "builders", &elsewhere), "TIMEOUT");
    assert_eq!(connect(&cluster, "others", PLATFORM), "TIMEOUT");
    assert_eq!(connect(&cluster, "default", PLATFORM), "connected");
}
