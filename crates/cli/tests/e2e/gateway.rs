//! Gateway API end to end with the real kubectl (bundled 1.33, and 1.27 for reads and
//! execs), after gateway-api's conformance cases: the GatewayClass and Gateway become
//! Accepted/Programmed with an address; HTTPRoute exact paths, prefixes, header matching and
//! hostname intersection route `kubectl exec … -- curl` requests to the right backend (the
//! answer names the pod, as conformance's echo server does); an 80/20 weight split over 200
//! requests; a route to a missing Service is ResolvedRefs=False BackendNotFound and answers
//! 500; a cross-namespace backend is RefNotPermitted until a ReferenceGrant allows it;
//! conflicting listeners are Conflicted; a GRPCRoute is Accepted and routes gRPC requests.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support::Cluster;

use crate::support::TWO_CPU_NODES as TOPOLOGY;

const V: &str = "1.33";
const OLD: &str = "1.27";
const INFRA: &str = "gateway-conformance-infra";
const APP: &str = "gateway-conformance-app-backend";

/// A backend pod and its Service (port 8080 → 3000), as conformance's `infra-backend-vN`.
fn backend(namespace: &str, name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}-0, namespace: {namespace}, labels: {{app: {name}}}}}
spec:
  containers:
  - name: echo
    image: gcr.io/k8s-staging-gateway-api/echo-basic:v20240412-v1.0.0-394-g40c666fd
    ports: [{{containerPort: 3000}}]
---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  selector: {{app: {name}}}
  ports:
  - protocol: TCP
    port: 8080
    targetPort: 3000
"#
    )
}

/// gateway-api's conformance base: the class, the Gateway, namespaces, backends, a client.
fn base() -> String {
    let mut docs = vec![
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {INFRA}}}\n"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {APP}}}\n"),
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: tessera
spec:
  controllerName: tessera.dev/gateway-controller
  description: Tessera's built-in Gateway API controller
"#
        .to_string(),
        format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: same-namespace
  namespace: {INFRA}
spec:
  gatewayClassName: tessera
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: Same
  - name: wildcard
    port: 8080
    protocol: HTTP
    hostname: "*.wildcard.io"
    allowedRoutes:
      namespaces:
        from: Same
"#
        ),
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: client, namespace: {INFRA}}}\nspec:\n  containers:\n  - {{name: curl, image: curlimages/curl:8.5.0, command: [sleep, infinity]}}\n"
        ),
    ];
    for name in ["infra-backend-v1", "infra-backend-v2", "infra-backend-v3"] {
        docs.push(backend(INFRA, name));
    }
    docs.push(backend(APP, "app-backend-v1"));
    docs.join("---\n")
}

/// The routes, in upstream's conformance shapes.
fn routes() -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: exact-path-matching
  namespace: {INFRA}
spec:
  parentRefs:
  - name: same-namespace
    sectionName: http
  hostnames: ["exact.example.com"]
  rules:
  - matches:
    - path:
        type: Exact
        value: /one
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - path:
        type: PathPrefix
        value: /two
    backendRefs:
    - name: infra-backend-v2
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: header-matching
  namespace: {INFRA}
spec:
  parentRefs:
  - name: same-namespace
  hostnames: ["headers.example.com"]
  rules:
  - matches:
    - headers:
      - name: version
        value: one
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - headers:
      - name: version
        value: two
      - name: color
        value: orange
    backendRefs:
    - name: infra-backend-v2
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: hostname-intersection
  namespace: {INFRA}
spec:
  parentRefs:
  - name: same-namespace
    sectionName: wildcard
  hostnames: ["foo.wildcard.io", "bar.com"]
  rules:
  - backendRefs:
    - name: infra-backend-v3
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: weighted-backends
  namespace: {INFRA}
spec:
  parentRefs:
  - name: same-namespace
  hostnames: ["weights.example.com"]
  rules:
  - backendRefs:
    - name: infra-backend-v1
      port: 8080
      weight: 80
    - name: infra-backend-v2
      port: 8080
      weight: 20
    - name: infra-backend-v3
      port: 8080
      weight: 0
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: invalid-backend-ref-not-found
  namespace: {INFRA}
spec:
  parentRefs:
  - name: same-namespace
  hostnames: ["missing.example.com"]
  rules:
  - backendRefs:
    - name: does-not-exist
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: cross-namespace
  namespace: {INFRA}
spec:
  parentRefs:
  - name: same-namespace
  hostnames: ["cross.example.com"]
  rules:
  - backendRefs:
    - name: app-backend-v1
      namespace: {APP}
      port: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: exact-method-matching
  namespace: {INFRA}
spec:
  parentRefs:
  - name: same-namespace
  hostnames: ["grpc.example.com"]
  rules:
  - matches:
    - method:
        service: gateway_api_conformance.echo_basic.grpcecho.GrpcEcho
        method: Echo
    backendRefs:
    - name: infra-backend-v1
      port: 8080
  - matches:
    - method:
        service: gateway_api_conformance.echo_basic.grpcecho.GrpcEcho
        method: EchoTwo
    backendRefs:
    - name: infra-backend-v2
      port: 8080
"#
    )
}

/// `kubectl exec client -- curl ARGS…`: (exit status of kubectl, stdout).
fn curl(cluster: &Cluster, v: &str, args: &[&str]) -> (bool, String) {
    let mut full = vec!["exec", "-n", INFRA, "client", "--", "curl"];
    full.extend_from_slice(args);
    let output = cluster.kubectl(v, &full);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// The pod that answered a request through the Gateway at `address` for `host` and `path`,
/// or the HTTP status when the Gateway answered itself.
fn answered(
    cluster: &Cluster,
    v: &str,
    address: &str,
    host: &str,
    path: &str,
    extra: &[&str],
) -> String {
    let host_header = format!("Host: {host}");
    let url = format!("http://{address}{path}");
    let mut args = vec!["-sS", "-H", &host_header];
    args.extend_from_slice(extra);
    args.extend(["-w", "\n%{http_code}", &url]);
    let (ok, out) = curl(cluster, v, &args);
    assert!(ok, "curl {args:?} failed: {out}");
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", &out));
    if code != "200" {
        return code.to_string();
    }
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    body["pod"].as_str().unwrap_or_default().to_string()
}

fn condition(
    cluster: &Cluster,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    path: &str,
) -> String {
    let mut args = vec!["get", kind, name, "-o"];
    let template = format!("jsonpath={path}");
    args.push(&template);
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    cluster.ok(V, &args)
}

fn wait(
    cluster: &Cluster,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    path: &str,
    want: &str,
) {
    let template = format!("jsonpath={path}");
    let mut args = vec!["get", kind, name, "-o", &template];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    cluster.wait_for(V, &args, |out| out == want);
}

const PARENT_ACCEPTED: &str = r#"{.status.parents[0].controllerName} {.status.parents[0].conditions[?(@.type=="Accepted")].status}"#;
const PARENT_REFS: &str = r#"{.status.parents[0].conditions[?(@.type=="ResolvedRefs")].status} {.status.parents[0].conditions[?(@.type=="ResolvedRefs")].reason}"#;

#[test]
fn gateway_api_routes_requests_as_conformance_expects() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 2);
    cluster.ok_stdin(V, &["apply", "-f", "-"], &base());
    // The class and the Gateway are accepted and programmed.
    wait(
        &cluster,
        "gatewayclass",
        None,
        "tessera",
        r#"{.status.conditions[?(@.type=="Accepted")].status}"#,
        "True",
    );
    wait(
        &cluster,
        "gateway",
        Some(INFRA),
        "same-namespace",
        r#"{.status.conditions[?(@.type=="Programmed")].status}"#,
        "True",
    );
    let gateway = condition(
        &cluster,
        "gateway",
        Some(INFRA),
        "same-namespace",
        r#"{.status.conditions[?(@.type=="Accepted")].reason} {.status.conditions[0].observedGeneration} {.status.listeners[0].supportedKinds[0].kind}"#,
    );
    assert_eq!(gateway, "Accepted 1 HTTPRoute");
    let address = condition(
        &cluster,
        "gateway",
        Some(INFRA),
        "same-namespace",
        "{.status.addresses[0].value}",
    );
    assert!(address.starts_with("172.18.255."), "{address}");
    let classes = cluster.ok(OLD, &["get", "gatewayclass"]);
    assert!(
        classes.contains("tessera.dev/gateway-controller") && classes.contains("True"),
        "{classes}"
    );
    let gateways = cluster.ok(OLD, &["get", "gateways", "-n", INFRA]);
    assert!(
        gateways.contains(&address) && gateways.contains("True"),
        "{gateways}"
    );

    for pod in [
        "client",
        "infra-backend-v1-0",
        "infra-backend-v2-0",
        "infra-backend-v3-0",
    ] {
        cluster.node_when_running(V, Some(INFRA), pod);
    }
    cluster.node_when_running(V, Some(APP), "app-backend-v1-0");
    // Requests wait for the backends' endpoints.
    cluster.wait_for(
        V,
        &[
            "get",
            "endpointslices",
            "-n",
            INFRA,
            "-o",
            "jsonpath={.items[*].endpoints[*].conditions.ready}",
        ],
        |out| out.split_whitespace().filter(|s| *s == "true").count() >= 3,
    );

    cluster.ok_stdin(V, &["apply", "-f", "-"], &routes());
    for route in [
        "exact-path-matching",
        "header-matching",
        "hostname-intersection",
        "weighted-backends",
    ] {
        wait(
            &cluster,
            "httproute",
            Some(INFRA),
            route,
            PARENT_ACCEPTED,
            "tessera.dev/gateway-controller True",
        );
        wait(
            &cluster,
            "httproute",
            Some(INFRA),
            route,
            PARENT_REFS,
            "True ResolvedRefs",
        );
    }
    wait(
        &cluster,
        "grpcroute",
        Some(INFRA),
        "exact-method-matching",
        PARENT_ACCEPTED,
        "tessera.dev/gateway-controller True",
    );
    // Attached routes are counted on the listeners (http: 6 HTTPRoutes and the GRPCRoute).
    wait(
        &cluster,
        "gateway",
        Some(INFRA),
        "same-namespace",
        "{.status.listeners[0].attachedRoutes} {.status.listeners[1].attachedRoutes}",
        "6 1",
    );

    // Exact paths and prefixes.
    let exact = "exact.example.com";
    for (v, path, want) in [
        (V, "/one", "infra-backend-v1-0"),
        (OLD, "/two", "infra-backend-v2-0"),
        (V, "/two/more", "infra-backend-v2-0"),
        (V, "/one/example", "404"),
        (OLD, "/", "404"),
    ] {
        assert_eq!(
            answered(&cluster, v, &address, exact, path, &[]),
            want,
            "{path}"
        );
    }
    // Header matching.
    let headers = "headers.example.com";
    for (extra, want) in [
        (vec!["-H", "version: one"], "infra-backend-v1-0"),
        (vec!["-H", "version: two"], "404"),
        (
            vec!["-H", "version: two", "-H", "color: orange"],
            "infra-backend-v2-0",
        ),
        (vec![], "404"),
    ] {
        assert_eq!(
            answered(&cluster, V, &address, headers, "/", &extra),
            want,
            "{extra:?}"
        );
    }
    // Hostname intersection: the listener's *.wildcard.io keeps foo.wildcard.io only.
    let wildcard = format!("{address}:8080");
    assert_eq!(
        answered(&cluster, V, &wildcard, "foo.wildcard.io", "/", &[]),
        "infra-backend-v3-0"
    );
    assert_eq!(answered(&cluster, V, &wildcard, "bar.com", "/", &[]), "404");
    assert_eq!(
        answered(&cluster, V, &address, "foo.wildcard.io", "/", &[]),
        "404"
    );

    // Weights: 200 requests in one curl over 80/20 (and 0): v1 gets 80% ± 10 points.
    let url = format!("http://{address}/");
    let mut args = vec!["-s", "-H", "Host: weights.example.com"];
    args.extend(std::iter::repeat_n(url.as_str(), 200));
    let (ok, out) = curl(&cluster, V, &args);
    assert!(ok, "{out}");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for body in serde_json::Deserializer::from_str(&out).into_iter::<Value>() {
        let body = body.expect("an echo answer");
        *counts
            .entry(body["pod"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let v1 = counts.get("infra-backend-v1-0").copied().unwrap_or(0);
    let v2 = counts.get("infra-backend-v2-0").copied().unwrap_or(0);
    assert_eq!(
        (v1 + v2, counts.get("infra-backend-v3-0")),
        (200, None),
        "{counts:?}"
    );
    assert!((140..=180).contains(&v1), "{counts:?}");

    // A missing backend: ResolvedRefs=False BackendNotFound, and requests get 500.
    wait(
        &cluster,
        "httproute",
        Some(INFRA),
        "invalid-backend-ref-not-found",
        PARENT_REFS,
        "False BackendNotFound",
    );
    assert_eq!(
        answered(&cluster, V, &address, "missing.example.com", "/", &[]),
        "500"
    );
    let (ok, _) = curl(
        &cluster,
        V,
        &["-sf", "-H", "Host: missing.example.com", &url],
    );
    assert!(!ok, "curl -f fails on a 500");

    // Cross-namespace: refused until a ReferenceGrant allows it.
    wait(
        &cluster,
        "httproute",
        Some(INFRA),
        "cross-namespace",
        PARENT_REFS,
        "False RefNotPermitted",
    );
    assert_eq!(
        answered(&cluster, V, &address, "cross.example.com", "/", &[]),
        "500"
    );
    cluster.ok_stdin(
        OLD,
        &["apply", "-f", "-"],
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata:
  name: allow-infra-routes
  namespace: {APP}
spec:
  from:
  - group: gateway.networking.k8s.io
    kind: HTTPRoute
    namespace: {INFRA}
  to:
  - group: ""
    kind: Service
"#
        ),
    );
    wait(
        &cluster,
        "httproute",
        Some(INFRA),
        "cross-namespace",
        PARENT_REFS,
        "True ResolvedRefs",
    );
    cluster.wait_for(
        V,
        &[
            "exec",
            "-n",
            INFRA,
            "client",
            "--",
            "curl",
            "-s",
            "-H",
            "Host: cross.example.com",
            &url,
        ],
        |out| {
            out.contains("\"pod\": \"app-backend-v1-0\"")
                && out.contains(&format!("\"namespace\": \"{APP}\""))
        },
    );

    // gRPC: the service and method pick the backend.
    let grpc = |method: &str| {
        let path = format!("/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/{method}");
        answered(
            &cluster,
            V,
            &address,
            "grpc.example.com",
            &path,
            &["-X", "POST", "-H", "content-type: application/grpc"],
        )
    };
    assert_eq!(grpc("Echo"), "infra-backend-v1-0");
    assert_eq!(grpc("EchoTwo"), "infra-backend-v2-0");
    assert_eq!(grpc("EchoThree"), "404");

    // Conflicting listeners: same port, different protocols.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: conflicted
  namespace: {INFRA}
spec:
  gatewayClassName: tessera
  listeners:
  - name: http
    port: 80
    protocol: HTTP
  - name: https
    port: 80
    protocol: HTTPS
    hostname: secure.example.com
    tls:
      certificateRefs:
      - name: secure-cert
  - name: tcp
    port: 9000
    protocol: TCP
"#
        ),
    );
    wait(
        &cluster,
        "gateway",
        Some(INFRA),
        "conflicted",
        r#"{.status.listeners[0].conditions[?(@.type=="Conflicted")].status} {.status.listeners[0].conditions[?(@.type=="Conflicted")].reason} {.status.listeners[2].conditions[?(@.type=="Accepted")].reason}"#,
        "True ProtocolConflict UnsupportedProtocol",
    );
    let conflicted = condition(
        &cluster,
        "gateway",
        Some(INFRA),
        "conflicted",
        r#"{.status.conditions[?(@.type=="Accepted")].status} {.status.conditions[?(@.type=="Accepted")].reason} {.status.conditions[?(@.type=="Programmed")].status}"#,
    );
    assert_eq!(conflicted, "False ListenersNotValid False");

    // A class naming another controller is left alone: a class of Tessera's created after
    // it is accepted, so the controller has seen both.
    cluster.ok_stdin(V, &["apply", "-f", "-"],
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: someone-else}\nspec: {controllerName: example.com/gateway-controller}\n");
    cluster.ok_stdin(V, &["apply", "-f", "-"],
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: tessera-later}\nspec: {controllerName: tessera.dev/gateway-controller}\n");
    wait(
        &cluster,
        "gatewayclass",
        None,
        "tessera-later",
        r#"{.status.conditions[?(@.type=="Accepted")].status}"#,
        "True",
    );
    assert_eq!(
        condition(
            &cluster,
            "gatewayclass",
            None,
            "someone-else",
            "{.status.conditions[*].reason}"
        ),
        ""
    );

    // Upstream's examples apply unchanged (kubectl 1.27); a Tessera class under the name the
    // http-routing guide uses programs its Gateway and accepts its routes.
    cluster.ok(OLD, &["create", "namespace", "examples"]);
    for file in [
        "http-routing-gateway.yaml",
        "http-routing-foo-httproute.yaml",
        "http-routing-bar-httproute.yaml",
        "reference-grant.yaml",
        "basic-grpc.yaml",
        "simple-split.yaml",
    ] {
        cluster.ok(OLD, &["apply", "-n", "examples", "-f", &fixture(file)]);
    }
    cluster.ok_stdin(V, &["apply", "-f", "-"],
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: example-gateway-class}\nspec: {controllerName: tessera.dev/gateway-controller}\n");
    wait(
        &cluster,
        "gateway",
        Some("examples"),
        "example-gateway",
        r#"{.status.conditions[?(@.type=="Programmed")].status}"#,
        "True",
    );
    for route in ["example-route", "foo-route", "bar-route"] {
        wait(
            &cluster,
            "httproute",
            Some("examples"),
            route,
            PARENT_ACCEPTED,
            "tessera.dev/gateway-controller True",
        );
        wait(
            &cluster,
            "httproute",
            Some("examples"),
            route,
            PARENT_REFS,
            "False BackendNotFound",
        );
    }
    wait(
        &cluster,
        "gateway",
        Some("examples"),
        "example-gateway",
        "{.status.listeners[0].attachedRoutes}",
        "3",
    );
    // The acme.io class of the gRPC example, and what uses it, stay untouched.
    assert_eq!(
        condition(
            &cluster,
            "gateway",
            Some("examples"),
            "my-gateway",
            "{.status.conditions[*].reason}"
        ),
        ""
    );
    assert_eq!(
        condition(
            &cluster,
            "grpcroute",
            Some("examples"),
            "grpc-app-1",
            "{.status.parents}"
        ),
        ""
    );
    let grant = cluster.ok(
        OLD,
        &[
            "get",
            "referencegrants.v1beta1.gateway.networking.k8s.io",
            "-n",
            "examples",
            "-o",
            "name",
        ],
    );
    assert_eq!(
        grant.trim(),
        "referencegrant.gateway.networking.k8s.io/allow-prod-traffic"
    );
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/upstream/gateway-api/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}
