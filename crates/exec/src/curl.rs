//! `curl` in the simulated containers: `curl [-s] [-S] [-i] [-f] [-H 'K: V'] [-X METHOD]
//! [-d DATA] [-m SECS] [-o /dev/null] [-w FORMAT] URL…` over HTTP(S). A URL's host is resolved
//! as any probe's; an address that is a Gateway's is routed by the Gateway API core
//! ([`tessera_gateway::routing`]) to a backend Service and then, as [`crate::network`] does,
//! to one ready endpoint, with network policy judged from the Gateway's proxy (a pod-shaped
//! peer in the Gateway's namespace labelled `gateway.networking.k8s.io/gateway-name`) to the
//! backend; any other address is opened directly. Whoever answers replies as gateway-api's
//! conformance `echo-basic` server does (JSON naming the path, host, method, headers,
//! namespace and pod), so a caller sees which backend answered.
//!
//! Failures read as curl's: `(6) Could not resolve host`, `(7) Failed to connect`, `(28)` for
//! a dropped connection, `(22)` for an HTTP error under `-f`; the Gateway's own answers (404
//! without a matching route, 500 for an unresolved backend, 503 without a reachable endpoint)
//! as Envoy-based gateways give them. No progress meter is drawn.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use serde_json::{Value, json};
use tessera_gateway::routing::{self, Request, Routed};
use tessera_gateway::{GATEWAY_NAME_LABEL, GatewayState};
use tessera_model::json::text;

use crate::network::{Outcome, Resolved, service_port};
use crate::{Output, Peer, Protocol, Session};

/// The User-Agent curl sends.
pub const USER_AGENT: &str = "curl/8.5.0";

#[derive(Debug, Default)]
struct Options {
    silent: bool,
    show_error: bool,
    include: bool,
    fail: bool,
    discard: bool,
    method: Option<String>,
    headers: Vec<(String, String)>,
    data: Option<String>,
    max_time: Option<f64>,
    write_out: Option<String>,
    urls: Vec<String>,
}

fn usage(message: &str) -> Output {
    Output::fail(
        2,
        format!(
            "curl: {message}\ncurl: try 'curl --help' or 'curl --manual' for more information\n"
        ),
    )
}

fn parse(args: &[&str]) -> Result<Options, Output> {
    let mut options = Options::default();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let mut value = |flag: &str| {
            words
                .next()
                .map(|w| w.to_string())
                .ok_or_else(|| usage(&format!("option {flag}: requires parameter")))
        };
        match *word {
            "-H" | "--header" => {
                let header = value(word)?;
                if let Some((name, v)) = header.split_once(':') {
                    options
                        .headers
                        .push((name.trim().to_string(), v.trim().to_string()));
                }
            }
            "-X" | "--request" => options.method = Some(value(word)?),
            "-d" | "--data" | "--data-raw" | "--data-binary" => options.data = Some(value(word)?),
            "-m" | "--max-time" | "--connect-timeout" => {
                let text = value(word)?;
                match text.parse::<f64>() {
                    Ok(seconds) => options.max_time = Some(seconds),
                    Err(_) => {
                        return Err(usage(&format!(
                            "option {word}: expected a proper numerical parameter"
                        )));
                    }
                }
            }
            "-o" | "--output" => {
                let file = value(word)?;
                if file != "/dev/null" {
                    return Err(Output::fail(
                        23,
                        format!(
                            "curl: (23) Failure writing output to destination, passed {file}\n"
                        ),
                    ));
                }
                options.discard = true;
            }
            "-w" | "--write-out" => options.write_out = Some(value(word)?),
            "--silent" => options.silent = true,
            "--show-error" => options.show_error = true,
            "--include" => options.include = true,
            "--fail" => options.fail = true,
            "--insecure" | "--location" | "--verbose" | "--http1.1" | "--http2" => {}
            flag if flag.starts_with("--") => {
                return Err(usage(&format!("option {flag}: is unknown")));
            }
            flags if flags.starts_with('-') && flags.len() > 1 => {
                for c in flags[1..].chars() {
                    match c {
                        's' => options.silent = true,
                        'S' => options.show_error = true,
                        'i' => options.include = true,
                        'f' => options.fail = true,
                        'k' | 'L' | 'v' => {}
                        _ => return Err(usage(&format!("option -{c}: is unknown"))),
                    }
                }
            }
            url => options.urls.push(url.to_string()),
        }
    }
    if options.urls.is_empty() {
        return Err(usage("no URL specified"));
    }
    Ok(options)
}

/// A URL taken apart.
struct Url {
    tls: bool,
    host: String,
    port: u16,
    /// Path with its query.
    path: String,
}

fn parse_url(url: &str) -> Result<Url, Output> {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("http".to_string(), url),
    };
    let tls = match scheme.as_str() {
        "http" => false,
        "https" => true,
        other => {
            return Err(Output::fail(
                1,
                format!("curl: (1) Protocol \"{other}\" not supported\n"),
            ));
        }
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => match port.parse::<u16>() {
            Ok(port) => (host, port),
            Err(_) => {
                return Err(Output::fail(
                    3,
                    "curl: (3) URL rejected: Port number was not a decimal number between 0 and 65535\n",
                ));
            }
        },
        None => (authority, if tls { 443 } else { 80 }),
    };
    if host.is_empty() {
        return Err(Output::fail(
            3,
            "curl: (3) URL rejected: No host part in the URL\n",
        ));
    }
    Ok(Url {
        tls,
        host: host.to_string(),
        port,
        path,
    })
}

/// An HTTP answer.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Go's `http.CanonicalHeaderKey`.
fn canonical(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => {
                    first.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// What echo-basic answers for a request that reached `pod`.
fn echo(
    pod: &Value,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(String, String)],
) -> Response {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("host") {
            continue;
        }
        map.entry(canonical(name)).or_default().push(value.clone());
    }
    let body = json!({
        "path": path,
        "host": host,
        "method": method,
        "proto": "HTTP/1.1",
        "headers": map,
        "namespace": text(pod, "/metadata/namespace"),
        "ingress": "",
        "service": "",
        "pod": text(pod, "/metadata/name"),
    });
    let body = serde_json::to_string_pretty(&body).unwrap_or_default() + "\n";
    Response {
        status: 200,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("X-Content-Type-Options".into(), "nosniff".into()),
        ],
        body,
    }
}

fn gateway_answer(status: u16, headers: Vec<(String, String)>, body: &str) -> Response {
    Response {
        status,
        headers,
        body: body.to_string(),
    }
}

/// The Gateway's proxy as network policy sees it.
pub fn proxy_pod(gateway: &GatewayState) -> Value {
    let address = gateway.address.map(|a| a.to_string()).unwrap_or_default();
    let ports: Vec<Value> = gateway
        .listeners
        .iter()
        .map(|l| json!({"name": l.name, "containerPort": l.port, "protocol": "TCP"}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": gateway.key.0, "name": format!("{}-proxy", gateway.key.1),
            "labels": {GATEWAY_NAME_LABEL: gateway.key.1}},
        "spec": {"containers": [{"name": "proxy", "ports": ports}]},
        "status": {"phase": "Running", "podIP": address, "podIPs": [{"ip": address}]},
    })
}

/// How one transfer ended before an HTTP answer.
enum Failure {
    /// `(6)`.
    Resolve,
    /// `(7)`.
    Refused,
    /// `(28)`.
    Timeout,
}

/// One transfer.
fn transfer(
    session: &Session<'_>,
    options: &Options,
    url: &Url,
    seed: u64,
) -> Result<Response, Failure> {
    let cluster = session.cluster;
    let address: Ipv4Addr = match cluster.resolve(session.pod, &url.host, session.policy, seed) {
        Resolved::Address(address) => address,
        _ => return Err(Failure::Resolve),
    };
    let method = options.method.clone().unwrap_or_else(|| {
        if options.data.is_some() {
            "POST"
        } else {
            "GET"
        }
        .to_string()
    });
    let default_port = if url.tls { 443 } else { 80 };
    let mut host = if url.port == default_port {
        url.host.clone()
    } else {
        format!("{}:{}", url.host, url.port)
    };
    let mut headers: Vec<(String, String)> = vec![
        ("User-Agent".into(), USER_AGENT.into()),
        ("Accept".into(), "*/*".into()),
    ];
    for (name, value) in &options.headers {
        if name.eq_ignore_ascii_case("host") {
            host = value.clone();
            continue;
        }
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        if !value.is_empty() {
            headers.push((name.clone(), value.clone()));
        }
    }
    if let Some(data) = &options.data {
        headers.push(("Content-Length".into(), data.len().to_string()));
        if !options
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        {
            headers.push((
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            ));
        }
    }
    let Some(gateway) = cluster.gateways.gateway_at(address) else {
        // Not a Gateway: straight to the address.
        let (outcome, pod) = cluster.open(
            session.pod,
            address,
            url.port,
            Protocol::Tcp,
            session.policy,
            seed,
        );
        return match (outcome, pod) {
            (Outcome::Connected, Some(pod)) => {
                // Straight to the pod's address names its port; through a Service the
                // connection reached whatever port the Service targets.
                let direct = text(pod, "/status/podIP") == address.to_string();
                let body = options.data.as_deref().unwrap_or_default().as_bytes();
                Ok(model_server_answer(
                    session,
                    pod,
                    direct.then_some(url.port),
                    &method,
                    &url.path,
                    body,
                )
                .unwrap_or_else(|| echo(pod, &host, &method, &url.path, &headers)))
            }
            (Outcome::Connected, None) => {
                Ok(gateway_answer(404, Vec::new(), "404 page not found\n"))
            }
            (Outcome::Timeout, _) => Err(Failure::Timeout),
            _ => Err(Failure::Refused),
        };
    };
    let proxy = proxy_pod(gateway);
    if !session
        .policy
        .allowed(session.pod, Peer::Pod(&proxy), url.port, Protocol::Tcp)
    {
        return Err(Failure::Timeout);
    }
    let request = Request {
        address,
        port: url.port,
        tls: url.tls,
        host: host.clone(),
        method: method.clone(),
        path: url.path.clone(),
        headers: headers.clone(),
    };
    let forward = match routing::route(&cluster.gateways, &request, seed) {
        Routed::NotAGateway | Routed::Refused => return Err(Failure::Refused),
        Routed::Respond { status, headers } => return Ok(gateway_answer(status, headers, "")),
        Routed::Forward(forward) => forward,
    };
    let backend = &forward.backend;
    if backend.group == tessera_inference::pool::GROUP
        && backend.kind == tessera_inference::pool::KIND
    {
        let body = options.data.as_deref().unwrap_or_default().as_bytes();
        return Ok(to_inference_pool(
            session, &proxy, &forward, &host, &method, &headers, body, seed,
        ));
    }
    if !(backend.group.is_empty() && backend.kind == "Service") {
        return Ok(gateway_answer(500, Vec::new(), ""));
    }
    let unavailable = |why: &str| Ok(gateway_answer(503, Vec::new(), why));
    let Some(service) = cluster.service(&backend.namespace, &backend.name) else {
        return Ok(gateway_answer(500, Vec::new(), ""));
    };
    let port = backend.port.unwrap_or(0);
    let Some(service_port) = service_port(
        service,
        |p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)),
        Protocol::Tcp,
    ) else {
        return unavailable("no healthy upstream");
    };
    let mut sent = forward.headers.clone();
    sent.push((
        "X-Forwarded-For".into(),
        text(session.pod, "/status/podIP").to_string(),
    ));
    sent.push((
        "X-Forwarded-Proto".into(),
        if url.tls { "https" } else { "http" }.into(),
    ));
    match cluster.to_endpoint(
        &proxy,
        service,
        service_port,
        Protocol::Tcp,
        session.policy,
        seed,
    ) {
        (Outcome::Connected, Some(pod)) => Ok(echo(pod, &host, &method, &forward.path, &sent)),
        (Outcome::Refused, None)
            if cluster
                .ready_endpoints(service, service_port, Protocol::Tcp)
                .is_empty() =>
        {
            unavailable("no healthy upstream")
        }
        (Outcome::Timeout, _) => unavailable(
            "upstream connect error or disconnect/reset before headers. reset reason: connection timeout",
        ),
        _ => unavailable(
            "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
        ),
    }
}

/// A model server's answer from `pod` (on `port` when the caller knows it), if it runs one.
fn model_server_answer(
    session: &Session<'_>,
    pod: &Value,
    port: Option<u16>,
    method: &str,
    path: &str,
    body: &[u8],
) -> Option<Response> {
    let answer = session.model_servers.serve(pod, port, method, path, body)?;
    let mut headers = vec![("content-type".to_string(), answer.content_type.to_string())];
    headers.extend(answer.headers);
    Some(Response {
        status: answer.status,
        headers,
        body: answer.body,
    })
}

/// A request routed to an InferencePool: its members (selected, ready pods the Gateway's
/// proxy may reach on the pool's port) are offered to the pool's endpoint picker with their
/// load, and the chosen pod answers. No pool or no readable spec is the Gateway's 500, no
/// member its 503.
#[allow(clippy::too_many_arguments)]
fn to_inference_pool(
    session: &Session<'_>,
    proxy: &Value,
    forward: &routing::Forward,
    host: &str,
    method: &str,
    headers: &[(String, String)],
    body: &[u8],
    seed: u64,
) -> Response {
    use tessera_inference::pool::{PoolSpec, members};
    let backend = &forward.backend;
    let cluster = session.cluster;
    let Some(pool) = cluster.inference_pools.iter().find(|p| {
        text(p, "/metadata/namespace") == backend.namespace
            && text(p, "/metadata/name") == backend.name
    }) else {
        return gateway_answer(500, Vec::new(), "");
    };
    let Ok(spec) = PoolSpec::from_object(pool) else {
        return gateway_answer(500, Vec::new(), "");
    };
    let port = spec.target_ports.first().copied().unwrap_or(8000);
    let reachable: Vec<&Value> = members(&spec, &backend.namespace, &cluster.pods)
        .into_iter()
        .map(|member| member.pod)
        .filter(|pod| {
            session
                .policy
                .allowed(proxy, Peer::Pod(pod), port, Protocol::Tcp)
        })
        .collect();
    if reachable.is_empty() {
        return gateway_answer(503, Vec::new(), "no healthy upstream");
    }
    let id = |pod: &Value| tessera_model::fnv::fnv64(text(pod, "/metadata/name").as_bytes());
    let candidates: Vec<(u64, tessera_inference::metrics::EndpointMetrics)> = reachable
        .iter()
        .map(|pod| (id(pod), session.model_servers.load(pod).unwrap_or_default()))
        .collect();
    let chat = forward
        .path
        .split('?')
        .next()
        .unwrap_or_default()
        .ends_with("/chat/completions");
    let (model, blocks) = tessera_inference::openai::pick_key(body, chat).unwrap_or_default();
    let request = tessera_inference::picker::PickRequest {
        model: &model,
        blocks: &blocks,
    };
    let pool_key = format!("{}/{}", backend.namespace, backend.name);
    let chosen = session
        .model_servers
        .pick(&pool_key, request, &candidates)
        .and_then(|chosen| reachable.iter().find(|pod| id(pod) == chosen))
        .copied()
        .unwrap_or(reachable[(seed % reachable.len() as u64) as usize]);
    model_server_answer(session, chosen, Some(port), method, &forward.path, body)
        .unwrap_or_else(|| echo(chosen, host, method, &forward.path, headers))
}

/// `curl …`.
pub fn curl(session: &Session<'_>, args: &[&str]) -> Output {
    let options = match parse(args) {
        Ok(options) => options,
        Err(output) => return output,
    };
    let show_errors = !options.silent || options.show_error;
    let mut output = Output::default();
    for (i, text_url) in options.urls.iter().enumerate() {
        let url = match parse_url(text_url) {
            Ok(url) => url,
            Err(failed) => {
                if show_errors {
                    output.stderr.extend(failed.stderr);
                }
                output.code = failed.code;
                continue;
            }
        };
        let seed = routing::mix(session.seed.wrapping_add(i as u64));
        let (code, error) = match transfer(session, &options, &url, seed) {
            Err(Failure::Resolve) => (6, format!("Could not resolve host: {}", url.host)),
            Err(Failure::Refused) => (
                7,
                format!(
                    "Failed to connect to {} port {} after 0 ms: Couldn't connect to server",
                    url.host, url.port
                ),
            ),
            Err(Failure::Timeout) => match options.max_time {
                Some(seconds) => (
                    28,
                    format!(
                        "Connection timed out after {} milliseconds",
                        (seconds * 1000.0).round() as u64
                    ),
                ),
                None => (
                    28,
                    format!(
                        "Failed to connect to {} port {} after 135000 ms: Couldn't connect to server",
                        url.host, url.port
                    ),
                ),
            },
            Ok(response) => {
                let failed = options.fail && response.status >= 400;
                if options.include && !failed {
                    let mut head = format!(
                        "HTTP/1.1 {} {}\r\n",
                        response.status,
                        reason(response.status)
                    );
                    for (name, value) in &response.headers {
                        let _ = write!(head, "{name}: {value}\r\n");
                    }
                    let _ = write!(head, "Content-Length: {}\r\n\r\n", response.body.len());
                    output.stdout.extend(head.into_bytes());
                }
                if !failed && !options.discard {
                    output.stdout.extend(response.body.as_bytes());
                }
                if let Some(format) = &options.write_out {
                    let code = response.status.to_string();
                    let written = format
                        .replace("%{http_code}", &code)
                        .replace("%{response_code}", &code)
                        .replace("\\n", "\n");
                    output.stdout.extend(written.into_bytes());
                }
                if failed {
                    (
                        22,
                        format!("The requested URL returned error: {}", response.status),
                    )
                } else {
                    (0, String::new())
                }
            }
        };
        if code != 0 {
            if let (Some(format), 6 | 7 | 28) = (&options.write_out, code) {
                let written = format
                    .replace("%{http_code}", "000")
                    .replace("%{response_code}", "000")
                    .replace("\\n", "\n");
                output.stdout.extend(written.into_bytes());
            }
            if show_errors {
                output
                    .stderr
                    .extend(format!("curl: ({code}) {error}\n").into_bytes());
            }
        }
        output.code = code;
    }
    output
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tessera_dns::Resolver;

    use super::*;
    use crate::{AllowAll, Cluster, PolicyVerdict};

    fn pod(namespace: &str, name: &str, ip: &str, port: u16) -> Value {
        json!({"metadata": {"namespace": namespace, "name": name, "labels": {"app": name}},
               "spec": {"containers": [{"name": "c", "ports": [{"containerPort": port}]}]},
               "status": {"podIP": ip, "phase": "Running"}})
    }

    fn service(namespace: &str, name: &str, ip: &str) -> Value {
        json!({"metadata": {"namespace": namespace, "name": name},
               "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}})
    }

    fn slice(namespace: &str, service: &str, ips: &[&str]) -> Value {
        json!({"metadata": {"namespace": namespace, "name": format!("{service}-abc"),
                "labels": {"kubernetes.io/service-name": service}},
               "ports": [{"name": "http", "port": 3000, "protocol": "TCP"}],
               "endpoints": ips.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
                   .collect::<Vec<_>>()})
    }

    fn cluster() -> Cluster {
        let services = vec![
            service("apps", "one", "10.96.0.11"),
            service("apps", "two", "10.96.0.12"),
            service("apps", "idle", "10.96.0.13"),
        ];
        let slices = vec![
            slice("apps", "one", &["10.244.0.11"]),
            slice("apps", "two", &["10.244.0.12"]),
            slice("apps", "idle", &[]),
        ];
        let inputs = tessera_gateway::Inputs {
            classes: vec![json!({"metadata": {"name": "tessera"},
                "spec": {"controllerName": tessera_gateway::CONTROLLER_NAME}})],
            gateways: vec![json!({"metadata": {"namespace": "apps", "name": "gw"},
                "spec": {"gatewayClassName": "tessera",
                         "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})],
            http_routes: vec![json!({"metadata": {"namespace": "apps", "name": "r"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/one"}}],
                 "backendRefs": [{"name": "one", "port": 8080}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/split"}}],
                 "backendRefs": [{"name": "one", "port": 8080, "weight": 80},
                                 {"name": "two", "port": 8080, "weight": 20}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/idle"}}],
                 "backendRefs": [{"name": "idle", "port": 8080}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/missing"}}],
                 "backendRefs": [{"name": "missing", "port": 8080}]},
            ]}})],
            services: services.clone(),
            ..tessera_gateway::Inputs::default()
        };
        Cluster {
            resolver: Resolver::new("cluster.local", &services, &slices),
            nameserver: "10.96.0.10".parse().expect("address"),
            pods: vec![
                pod("apps", "one-0", "10.244.0.11", 3000),
                pod("apps", "two-0", "10.244.0.12", 3000),
                pod("apps", "client", "10.244.0.9", 1),
            ],
            services,
            slices,
            nodes: Vec::new(),
            gateways: tessera_gateway::Model::build(&inputs),
            inference_pools: Vec::new(),
        }
    }

    fn run(cluster: &Cluster, policy: &dyn PolicyVerdict, seed: u64, line: &str) -> Output {
        let client = &cluster.pods[2];
        let session = Session {
            cluster,
            pod: client,
            container: "c",
            gpus: &[],
            policy,
            model_servers: &tessera_inference::openai::NoModelServers,
            seed,
        };
        let argv: Vec<String> = crate::shell::parse(line)
            .ok()
            .and_then(|mut c| c.pop())
            .map(|(_, argv)| argv)
            .unwrap_or_default();
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        curl(&session, &args[1..])
    }

    fn stdout(output: &Output) -> String {
        String::from_utf8_lossy(&output.stdout).to_string()
    }

    fn stderr(output: &Output) -> String {
        String::from_utf8_lossy(&output.stderr).to_string()
    }

    struct Deny(fn(&Value, Peer<'_>) -> bool);

    impl PolicyVerdict for Deny {
        fn allowed(&self, from: &Value, to: Peer<'_>, _: u16, _: Protocol) -> bool {
            !(self.0)(from, to)
        }
    }

    #[test]
    fn requests_to_a_gateway_reach_the_routed_backend() {
        let cluster = cluster();
        let out = run(
            &cluster,
            &AllowAll,
            1,
            "curl -s -H 'X-Echo: yes' http://172.18.255.1/one/x?q=1",
        );
        assert_eq!(out.code, 0, "{}", stderr(&out));
        let body: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(body["pod"], "one-0");
        assert_eq!(body["namespace"], "apps");
        assert_eq!(body["path"], "/one/x?q=1");
        assert_eq!(body["host"], "172.18.255.1");
        assert_eq!(body["method"], "GET");
        assert_eq!(body["headers"]["X-Echo"], json!(["yes"]));
        assert_eq!(body["headers"]["User-Agent"], json!([USER_AGENT]));
        // The same Service by its name, bypassing the Gateway.
        let out = run(
            &cluster,
            &AllowAll,
            1,
            "curl -s http://two.apps:8080/direct",
        );
        let body: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(body["pod"], "two-0");
        assert_eq!(body["host"], "two.apps:8080");
    }

    #[test]
    fn failures_read_as_curls() {
        let cluster = cluster();
        // (command line, exit code, stdout, stderr)
        let table: Vec<(&str, i32, &str, &str)> = vec![
            ("curl -s http://172.18.255.1/nowhere", 0, "", ""),
            (
                "curl -s -o /dev/null -w '%{http_code}' http://172.18.255.1/nowhere",
                0,
                "404",
                "",
            ),
            ("curl -sf http://172.18.255.1/nowhere", 22, "", ""),
            (
                "curl -sSf http://172.18.255.1/nowhere",
                22,
                "",
                "curl: (22) The requested URL returned error: 404\n",
            ),
            (
                "curl -sS -w '%{http_code}' http://172.18.255.1/missing",
                0,
                "500",
                "",
            ),
            (
                "curl -s http://172.18.255.1/idle",
                0,
                "no healthy upstream",
                "",
            ),
            (
                "curl -sS http://172.18.255.1:8080/",
                7,
                "",
                "curl: (7) Failed to connect to 172.18.255.1 port 8080 after 0 ms: Couldn't connect to server\n",
            ),
            (
                "curl -sS http://nope.apps/",
                6,
                "",
                "curl: (6) Could not resolve host: nope.apps\n",
            ),
            (
                "curl -sS ftp://x/",
                1,
                "",
                "curl: (1) Protocol \"ftp\" not supported\n",
            ),
            (
                "curl -s",
                2,
                "",
                "curl: no URL specified\ncurl: try 'curl --help' or 'curl --manual' for more information\n",
            ),
            (
                "curl --bogus http://x/",
                2,
                "",
                "curl: option --bogus: is unknown\ncurl: try 'curl --help' or 'curl --manual' for more information\n",
            ),
        ];
        for (line, code, out, err) in table {
            let output = run(&cluster, &AllowAll, 1, line);
            assert_eq!(
                (
                    output.code,
                    stdout(&output).as_str(),
                    stderr(&output).as_str()
                ),
                (code, out, err),
                "{line}"
            );
        }
        let head = stdout(&run(
            &cluster,
            &AllowAll,
            1,
            "curl -si http://172.18.255.1/one",
        ));
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"),
            "{head}"
        );
    }

    #[test]
    fn network_policy_applies_on_both_legs() {
        let cluster = cluster();
        // The client may not reach the Gateway's proxy.
        let deny_client = Deny(
            |_, to| matches!(to, Peer::Pod(p) if text(p, "/metadata/labels/gateway.networking.k8s.io~1gateway-name") == "gw"),
        );
        let out = run(
            &cluster,
            &deny_client,
            1,
            "curl -sS -m 2 http://172.18.255.1/one",
        );
        assert_eq!(
            (out.code, stderr(&out).as_str()),
            (
                28,
                "curl: (28) Connection timed out after 2000 milliseconds\n"
            )
        );
        // The proxy may not reach the backend.
        let deny_proxy = Deny(|from, _| text(from, "/metadata/name") == "gw-proxy");
        let out = run(&cluster, &deny_proxy, 1, "curl -s http://172.18.255.1/one");
        assert_eq!(
            stdout(&out),
            "upstream connect error or disconnect/reset before headers. reset reason: connection timeout"
        );
    }

    #[test]
    fn weights_split_requests_of_one_invocation() {
        let cluster = cluster();
        let urls = vec!["http://172.18.255.1/split"; 200].join(" ");
        let out = run(&cluster, &AllowAll, 5, &format!("curl -s {urls}"));
        let mut counts = BTreeMap::new();
        for body in serde_json::Deserializer::from_slice(&out.stdout).into_iter::<Value>() {
            let body = body.expect("json");
            *counts.entry(text(&body, "/pod").to_string()).or_insert(0) += 1;
        }
        let one = counts.get("one-0").copied().unwrap_or(0);
        let two = counts.get("two-0").copied().unwrap_or(0);
        assert_eq!(one + two, 200);
        assert!((140..=180).contains(&one), "{counts:?}");
    }
}
