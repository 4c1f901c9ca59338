//! Table tests of request routing, after gateway-api's conformance cases (HTTPRouteExactPathMatching,
//! HTTPRouteMatchingAcrossRoutes, HTTPRouteHeaderMatching, HTTPRouteHostnameIntersection,
//! HTTPRouteWeight, HTTPRouteInvalidBackendRefNotFound, GRPCExactMethodMatching).

use serde_json::{Value, json};

use super::*;
use crate::{CONTROLLER_NAME, Inputs};

const GW: &str = "172.18.255.1";

fn inputs(routes: Vec<Value>) -> Inputs {
    let services = ["a", "b", "c", "d"]
        .iter()
        .map(|n| json!({"metadata": {"namespace": "apps", "name": n}}))
        .collect();
    Inputs {
        classes: vec![json!({"metadata": {"name": "tessera"},
            "spec": {"controllerName": CONTROLLER_NAME}})],
        gateways: vec![json!({
        "metadata": {"namespace": "apps", "name": "gw"},
        "spec": {"gatewayClassName": "tessera", "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP"},
            {"name": "https", "port": 443, "protocol": "HTTPS"},
            {"name": "special", "port": 8080, "protocol": "HTTP", "hostname": "special.example.com"},
            {"name": "wild", "port": 8080, "protocol": "HTTP", "hostname": "*.example.com"},
        ]}})],
        http_routes: routes,
        services,
        ..Inputs::default()
    }
}

fn object(name: &str, created: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("parentRefs").is_none() {
        spec["parentRefs"] = json!([{"name": "gw", "sectionName": "http"}]);
    }
    json!({"metadata": {"namespace": "apps", "name": name, "creationTimestamp": created},
           "spec": spec})
}

fn to(service: &str) -> Value {
    json!([{"name": service, "port": 8080}])
}

fn request(port: u16, host: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> Request {
    Request {
        address: GW.parse().expect("address"),
        port,
        tls: false,
        host: host.to_string(),
        method: method.to_string(),
        path: path.to_string(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }
}

/// Where a request went: the backend Service's name, or the status the Gateway answered.
fn outcome(model: &Model, request: &Request) -> String {
    match route(model, request, 7) {
        Routed::Forward(f) => f.backend.name,
        Routed::Respond { status, .. } => status.to_string(),
        Routed::Refused => "refused".to_string(),
        Routed::NotAGateway => "not-a-gateway".to_string(),
    }
}

fn check(model: &Model, table: &[(Request, &str)]) {
    for (request, want) in table {
        assert_eq!(outcome(model, request), *want, "{request:?}");
    }
}

fn get(path: &str) -> Request {
    request(80, "example.com", "GET", path, &[])
}

#[test]
fn exact_paths_beat_the_longest_prefix() {
    let model = Model::build(&inputs(vec![object(
        "r",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": to("c")},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/one"}}], "backendRefs": to("b")},
            {"matches": [{"path": {"type": "Exact", "value": "/one"}}], "backendRefs": to("a")},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/one/two/"}}], "backendRefs": to("d")},
        ]}),
    )]));
    check(
        &model,
        &[
            (get("/one"), "a"),
            (get("/one/"), "b"),
            (get("/one/x"), "b"),
            (get("/one/two"), "d"),
            (get("/one/two/three?x=1"), "d"),
            (get("/onetwo"), "c"),
            (get("/"), "c"),
        ],
    );
}

#[test]
fn method_then_headers_then_query_decide_ties() {
    let model = Model::build(&inputs(vec![object(
        "r",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": to("a")},
            {"matches": [{"headers": [{"name": "Version", "value": "two"}]}], "backendRefs": to("b")},
            {"matches": [{"headers": [{"name": "version", "value": "two"},
                                      {"name": "color", "value": "orange"}]}], "backendRefs": to("c")},
            {"matches": [{"method": "POST"}], "backendRefs": to("d")},
            {"matches": [{"queryParams": [{"name": "animal", "value": "whale"}]},
                         {"headers": [{"type": "RegularExpression", "name": "X-Re", "value": "v[0-9]+"}]}],
             "backendRefs": to("b")},
        ]}),
    )]));
    check(
        &model,
        &[
            (get("/"), "a"),
            (request(80, "x", "GET", "/", &[("version", "two")]), "b"),
            (request(80, "x", "GET", "/", &[("VERSION", "two")]), "b"),
            (request(80, "x", "GET", "/", &[("version", "TWO")]), "a"),
            (
                request(
                    80,
                    "x",
                    "GET",
                    "/",
                    &[("version", "two"), ("color", "orange")],
                ),
                "c",
            ),
            // A method match outranks any number of header matches.
            (
                request(
                    80,
                    "x",
                    "POST",
                    "/",
                    &[("version", "two"), ("color", "orange")],
                ),
                "d",
            ),
            (get("/?animal=whale"), "b"),
            (get("/?animal=dolphin"), "a"),
            (request(80, "x", "GET", "/", &[("x-re", "v12")]), "b"),
            (request(80, "x", "GET", "/", &[("x-re", "v12x")]), "a"),
        ],
    );
}

#[test]
fn across_routes_hostname_then_age_then_name_decide() {
    let model = Model::build(&inputs(vec![
        object(
            "wild",
            "2026-01-01T00:00:00Z",
            json!({"hostnames": ["*.example.com"], "rules": [{"backendRefs": to("b")}]}),
        ),
        object(
            "exact",
            "2026-01-02T00:00:00Z",
            json!({"hostnames": ["foo.example.com"], "rules": [{"backendRefs": to("a")}]}),
        ),
        object(
            "zz-any",
            "2026-01-01T00:00:00Z",
            json!({"rules": [{"backendRefs": to("c")}]}),
        ),
        object(
            "aa-any",
            "2026-01-01T00:00:00Z",
            json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/same"}}], "backendRefs": to("d")}]}),
        ),
        object(
            "older-same",
            "2025-12-01T00:00:00Z",
            json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/same"}}], "backendRefs": to("a")}]}),
        ),
        object(
            "ab-any",
            "2026-01-01T00:00:00Z",
            json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/tie"}}], "backendRefs": to("b")}]}),
        ),
        object(
            "aa-tie",
            "2026-01-01T00:00:00Z",
            json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/tie"}}], "backendRefs": to("d")}]}),
        ),
    ]));
    check(
        &model,
        &[
            (request(80, "foo.example.com", "GET", "/", &[]), "a"),
            (request(80, "FOO.example.com:80", "GET", "/", &[]), "a"),
            (request(80, "bar.example.com", "GET", "/", &[]), "b"),
            (request(80, "other.com", "GET", "/", &[]), "c"),
            (request(80, "other.com", "GET", "/same", &[]), "a"),
            (request(80, "other.com", "GET", "/tie", &[]), "d"),
            // A more specific hostname wins even against a longer path match.
            (request(80, "bar.example.com", "GET", "/tie", &[]), "b"),
        ],
    );
}

#[test]
fn listener_hostnames_pick_the_listener_and_narrow_routes() {
    let parent = |section: &str| json!([{"name": "gw", "sectionName": section}]);
    let model = Model::build(&inputs(vec![
        object(
            "special",
            "2026-01-01T00:00:00Z",
            json!({"parentRefs": parent("special"), "rules": [{"backendRefs": to("a")}]}),
        ),
        object(
            "wild",
            "2026-01-01T00:00:00Z",
            json!({"parentRefs": parent("wild"), "hostnames": ["*.example.com", "other.org"],
                     "rules": [{"backendRefs": to("b")}]}),
        ),
    ]));
    check(
        &model,
        &[
            (request(8080, "special.example.com", "GET", "/", &[]), "a"),
            (request(8080, "x.example.com", "GET", "/", &[]), "b"),
            (request(8080, "other.org", "GET", "/", &[]), "404"),
            (request(8080, "example.com", "GET", "/", &[]), "404"),
            (request(81, "x.example.com", "GET", "/", &[]), "refused"),
            (
                Request {
                    tls: true,
                    ..request(80, "x", "GET", "/", &[])
                },
                "refused",
            ),
            (
                Request {
                    tls: true,
                    ..request(443, "x", "GET", "/", &[])
                },
                "404",
            ),
            (
                Request {
                    address: "10.0.0.1".parse().expect("ip"),
                    ..get("/")
                },
                "not-a-gateway",
            ),
        ],
    );
}

#[test]
fn weights_split_traffic_deterministically() {
    let model = Model::build(&inputs(vec![object(
        "r",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
        {"backendRefs": [{"name": "a", "port": 8080, "weight": 80},
                         {"name": "b", "port": 8080, "weight": 20},
                         {"name": "c", "port": 8080, "weight": 0}]}]}),
    )]));
    let mut counts = std::collections::BTreeMap::new();
    for seed in 0..1000u64 {
        let Routed::Forward(f) = route(&model, &get("/"), seed) else {
            panic!("not forwarded");
        };
        *counts.entry(f.backend.name).or_insert(0) += 1;
    }
    let a = counts.get("a").copied().unwrap_or(0);
    let b = counts.get("b").copied().unwrap_or(0);
    assert_eq!(counts.get("c"), None, "weight 0 is never chosen");
    assert_eq!(a + b, 1000);
    assert!((750..=850).contains(&a), "a got {a} of 1000");
    // The same seed picks the same backend.
    assert_eq!(route(&model, &get("/"), 42), route(&model, &get("/"), 42));
}

#[test]
fn unresolved_backends_answer_500_and_unmatched_requests_404() {
    let model = Model::build(&inputs(vec![object(
        "r",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"type": "Exact", "value": "/missing"}}],
             "backendRefs": [{"name": "missing", "port": 8080}]},
            {"matches": [{"path": {"type": "Exact", "value": "/zero"}}],
             "backendRefs": [{"name": "a", "port": 8080, "weight": 0}]},
            {"matches": [{"path": {"type": "Exact", "value": "/none"}}]},
            {"matches": [{"path": {"type": "Exact", "value": "/ok"}}], "backendRefs": to("a")},
        ]}),
    )]));
    check(
        &model,
        &[
            (get("/missing"), "500"),
            (get("/zero"), "500"),
            (get("/none"), "500"),
            (get("/ok"), "a"),
            (get("/elsewhere"), "404"),
        ],
    );
}

#[test]
fn a_bad_expression_keeps_the_route_off_the_gateway() {
    let model = Model::build(&inputs(vec![object(
        "r",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"type": "RegularExpression", "value": "/(a"}}], "backendRefs": to("a")},
        ]}),
    )]));
    assert_eq!(
        model.routes[0].parents[0]
            .accepted
            .as_ref()
            .map_err(|e| e.0),
        Err("UnsupportedValue")
    );
    check(&model, &[(get("/a"), "404")]);
}

#[test]
fn filters_modify_headers_and_redirect() {
    let model = Model::build(&inputs(vec![object(
        "r",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/mod"}}],
             "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
                "set": [{"name": "X-Set", "value": "s"}], "add": [{"name": "X-Add", "value": "a"}],
                "remove": ["X-Gone"]}}],
             "backendRefs": to("a")},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/redirect"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {
                "hostname": "elsewhere.example.com", "statusCode": 301}}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/secure"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]},
        ]}),
    )]));
    let sent = request(
        80,
        "x",
        "GET",
        "/mod",
        &[("x-set", "old"), ("X-Gone", "1"), ("Keep", "k")],
    );
    let Routed::Forward(f) = route(&model, &sent, 1) else {
        panic!("not forwarded");
    };
    assert_eq!(
        f.headers,
        vec![
            ("Keep".to_string(), "k".to_string()),
            ("X-Set".to_string(), "s".to_string()),
            ("X-Add".to_string(), "a".to_string()),
        ]
    );
    let location =
        |path: &str| match route(&model, &request(80, "x.example.com", "GET", path, &[]), 1) {
            Routed::Respond { status, headers } => (status, headers[0].1.clone()),
            other => panic!("{other:?}"),
        };
    assert_eq!(
        location("/redirect?q=1"),
        (301, "http://elsewhere.example.com/redirect?q=1".to_string())
    );
    assert_eq!(
        location("/secure"),
        (302, "https://x.example.com/secure".to_string())
    );
}

#[test]
fn grpc_requests_match_service_method_and_headers() {
    let mut inputs = inputs(Vec::new());
    inputs.grpc_routes = vec![object(
        "g",
        "2026-01-01T00:00:00Z",
        json!({"rules": [
            {"matches": [{"method": {"service": "helloworld.Greeter"}}], "backendRefs": to("a")},
            {"matches": [{"method": {"service": "helloworld.Greeter", "method": "SayHello"}}],
             "backendRefs": to("b")},
            {"matches": [{"method": {"type": "RegularExpression", "service": ".*\\.Health"},
                          "headers": [{"name": "x-canary", "value": "1"}]}], "backendRefs": to("c")},
        ]}),
    )];
    let model = Model::build(&inputs);
    let grpc = |path: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![("content-type", "application/grpc")];
        headers.extend_from_slice(extra);
        request(80, "x", "POST", path, &headers)
    };
    check(
        &model,
        &[
            (grpc("/helloworld.Greeter/SayHello", &[]), "b"),
            (grpc("/helloworld.Greeter/SayGoodbye", &[]), "a"),
            (
                grpc("/grpc.health.v1.Health/Check", &[("x-canary", "1")]),
                "c",
            ),
            (grpc("/grpc.health.v1.Health/Check", &[]), "404"),
            // Without the gRPC content type the request is HTTP, and no HTTPRoute is attached.
            (
                request(80, "x", "POST", "/helloworld.Greeter/SayHello", &[]),
                "404",
            ),
        ],
    );
}
