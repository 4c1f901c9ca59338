//! `pods/exec`: the request's options and checks as kube-apiserver makes them, the upgrade to
//! SPDY/3.1 ([`crate::spdy`]) or WebSocket ([`crate::websocket`]) with the stream protocol
//! negotiated, and the error stream's status (v4/v5: a JSON `Status` whose `NonZeroExitCode`
//! cause carries the exit code).
//!
//! What runs is a [`ContainerRuntime`]'s, which the node twins register
//! ([`ApiServer::register_container_runtime`]); this module knows no containers.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use futures::future::BoxFuture;
use http::{HeaderMap, Method, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use tessera_api::error::{ApiError, ApiResult};
use tessera_api::resource::Resource;
use tessera_exec::Output;
use tessera_model::json::text;

use crate::server::ApiServer;
use crate::websocket;

/// The SPDY stream protocols served, best first.
const SPDY_PROTOCOLS: [&str; 5] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// What to run: the pod, the container and the command.
#[derive(Debug, Clone)]
pub struct ExecTarget {
    /// The pod, as stored.
    pub pod: Value,
    /// The container's name.
    pub container: String,
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// Runs commands in containers (the node twins' simulated containers).
pub trait ContainerRuntime: Send + Sync {
    /// Runs `target` with `stdin` as its whole input.
    fn exec(
        &self,
        target: ExecTarget,
        stdin: Vec<u8>,
    ) -> BoxFuture<'static, Result<Output, String>>;
}

/// Which streams the client asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streams {
    /// `stdin=true`.
    pub stdin: bool,
    /// `stdout=true`.
    pub stdout: bool,
    /// `stderr=true`.
    pub stderr: bool,
    /// `tty=true`.
    pub tty: bool,
}

impl Streams {
    /// The SPDY stream types the client opens, in its order.
    pub fn expected(&self) -> Vec<&'static str> {
        let mut kinds = vec!["error"];
        for (wanted, kind) in [
            (self.stdin, "stdin"),
            (self.stdout, "stdout"),
            // With a terminal, stderr is merged into stdout: no stream of its own.
            (self.stderr && !self.tty, "stderr"),
            (self.tty, "resize"),
        ] {
            if wanted {
                kinds.push(kind);
            }
        }
        kinds
    }
}

/// What a session writes when the command has ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ended {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error (with a tty, merged into stdout by the caller's choice; kept apart here).
    pub stderr: Vec<u8>,
    /// The error stream's bytes.
    pub error: Vec<u8>,
}

/// The command of one session, ready to run once its input is in.
pub struct Finish {
    reads_stdin: bool,
    protocol: &'static str,
    target: ExecTarget,
    runtime: Arc<dyn ContainerRuntime>,
}

impl Finish {
    /// Whether the command reads standard input (so the session waits for its end).
    pub fn reads_stdin(&self) -> bool {
        self.reads_stdin
    }

    /// Runs the command; the streams' contents.
    pub async fn run(self, stdin: Vec<u8>) -> Ended {
        let result = self.runtime.exec(self.target.clone(), stdin).await;
        ended(self.protocol, &self.target.command, result)
    }
}

/// The streams' contents for a command's result under a stream protocol.
pub fn ended(protocol: &str, command: &[String], result: Result<Output, String>) -> Ended {
    let structured = matches!(protocol, "v4.channel.k8s.io" | "v5.channel.k8s.io");
    let (output, status) = match result {
        Ok(output) if output.code == 0 => (output, json!({"metadata": {}, "status": "Success"})),
        Ok(output) => {
            let message = format!(
                "command terminated with non-zero exit code: command '{}' exited with {}",
                command.join(" "),
                output.code
            );
            let status = json!({
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": output.code.to_string()}]},
            });
            (output, status)
        }
        Err(message) => (
            Output::default(),
            json!({"metadata": {}, "status": "Failure", "message": message}),
        ),
    };
    let error = if structured {
        serde_json::to_vec(&status).unwrap_or_default()
    } else if status["status"] == "Success" {
        Vec::new()
    } else {
        text(&status, "/message").as_bytes().to_vec()
    };
    Ended {
        stdout: output.stdout,
        stderr: output.stderr,
        error,
    }
}

/// The exec request's options, from the raw query (`command` repeats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// The command.
    pub command: Vec<String>,
    /// The container (empty: the only one).
    pub container: String,
    /// The streams.
    pub streams: Streams,
}

impl ExecOptions {
    /// Reads and checks the options as kube-apiserver does.
    pub fn parse(query: Option<&str>) -> ApiResult<ExecOptions> {
        let mut options = ExecOptions::default();
        for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let on = matches!(value.as_ref(), "true" | "1");
            match key.as_ref() {
                "command" => options.command.push(value.into_owned()),
                "container" => options.container = value.into_owned(),
                "stdin" => options.streams.stdin = on,
                "stdout" => options.streams.stdout = on,
                "stderr" => options.streams.stderr = on,
                "tty" => options.streams.tty = on,
                _ => {}
            }
        }
        let streams = options.streams;
        if !streams.stdin && !streams.stdout && !streams.stderr {
            return Err(ApiError::bad_request(
                "you must specify at least 1 of stdin, stdout, stderr",
            ));
        }
        if options.command.is_empty() {
            return Err(ApiError::bad_request(
                "you must specify at least one command for the container",
            ));
        }
        Ok(options)
    }
}

/// The container `requested` names in `pod`, or its only one; the refusals are
/// kube-apiserver's.
pub fn container_of(pod: &Value, requested: &str) -> ApiResult<String> {
    let name = text(pod, "/metadata/name");
    if text(pod, "/spec/nodeName").is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let phase = text(pod, "/status/phase");
    if phase == "Succeeded" || phase == "Failed" {
        return Err(ApiError::bad_request(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    let names: Vec<&str> = [
        "/spec/containers",
        "/spec/initContainers",
        "/spec/ephemeralContainers",
    ]
    .iter()
    .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
    .flatten()
    .map(|c| text(c, "/name"))
    .collect();
    if requested.is_empty() {
        let main: Vec<&str> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| text(c, "/name"))
            .collect();
        return match main.as_slice() {
            [only] => Ok(only.to_string()),
            _ => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                main.join(" ")
            ))),
        };
    }
    if names.contains(&requested) {
        Ok(requested.to_string())
    } else {
        Err(ApiError::bad_request(format!(
            "container {requested} is not valid for pod {name}"
        )))
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
}

fn upgrade_required() -> ApiError {
    let mut error = ApiError::bad_request("Upgrade request required");
    error.code = 400;
    error
}

/// Serves `POST`/`GET …/pods/<name>/exec`.
pub async fn exec(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: &str,
    name: &str,
    mut request: Request,
) -> ApiResult<Response> {
    if request.method() != Method::GET && request.method() != Method::POST {
        return Err(ApiError::method_not_allowed(request.method().as_str()));
    }
    let options = ExecOptions::parse(request.uri().query())?;
    let pod = server.objects.get(resource, Some(namespace), name)?;
    let container = container_of(&pod, &options.container)?;
    let runtime = server
        .container_runtime()
        .ok_or_else(|| ApiError::internal("error dialing backend: no node twin serves exec"))?;
    let headers = request.headers().clone();
    let upgrade_to = header_values(&headers, header::UPGRADE.as_str())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let Some(on_upgrade) = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>()
    else {
        return Err(upgrade_required());
    };
    let reads_stdin = options.streams.stdin && tessera_exec::reads_stdin(&options.command);
    let target = ExecTarget {
        pod,
        container,
        command: options.command.clone(),
    };
    let streams = options.streams;
    let (response, protocol, websocket) = if upgrade_to == "websocket" {
        let key = header_values(&headers, "sec-websocket-key")
            .next()
            .ok_or_else(upgrade_required)?;
        let protocol =
            websocket::choose_protocol(header_values(&headers, "sec-websocket-protocol"))
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "unable to upgrade: no supported WebSocket subprotocol requested",
                    )
                })?;
        let response = Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::CONNECTION, "Upgrade")
            .header(header::UPGRADE, "websocket")
            .header("Sec-WebSocket-Accept", websocket::accept_key(key))
            .header("Sec-WebSocket-Protocol", protocol)
            .body(Body::empty());
        (response, protocol, true)
    } else if upgrade_to.starts_with("spdy/3.1") {
        let offered: Vec<&str> = header_values(&headers, "x-stream-protocol-version")
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        let protocol = SPDY_PROTOCOLS
            .into_iter()
            .find(|p| offered.contains(p))
            .unwrap_or("channel.k8s.io");
        let response = Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::CONNECTION, "Upgrade")
            .header(header::UPGRADE, "SPDY/3.1")
            .header("X-Stream-Protocol-Version", protocol)
            .body(Body::empty());
        (response, protocol, false)
    } else {
        return Err(upgrade_required());
    };
    let response = response.map_err(|e| ApiError::internal(e.to_string()))?;
    let finish = Finish {
        reads_stdin,
        protocol,
        target,
        runtime,
    };
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => TokioIo::new(upgraded),
            Err(error) => {
                tracing::debug!(%error, "exec upgrade failed");
                return;
            }
        };
        let result = if websocket {
            websocket::serve(upgraded, protocol, streams, finish)
                .await
                .map_err(|e| e.to_string())
        } else {
            crate::spdy::serve(upgraded, streams, finish)
                .await
                .map_err(|e| e.to_string())
        };
        if let Err(error) = result {
            tracing::debug!(%error, "exec session ended with an error");
        }
    });
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn the_error_stream_carries_the_exit_code_as_upstream() {
        let ok = Output {
            stdout: b"out".to_vec(),
            stderr: Vec::new(),
            code: 0,
        };
        let three = Output {
            stdout: Vec::new(),
            stderr: b"err".to_vec(),
            code: 3,
        };
        let cases: Vec<(&str, Result<Output, String>, &str)> = vec![
            (
                "v4.channel.k8s.io",
                Ok(ok.clone()),
                r#"{"metadata":{},"status":"Success"}"#,
            ),
            (
                "v5.channel.k8s.io",
                Ok(three.clone()),
                r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: command 'sh -c exit 3' exited with 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#,
            ),
            (
                "v4.channel.k8s.io",
                Err("no such container".into()),
                r#"{"metadata":{},"status":"Failure","message":"no such container"}"#,
            ),
            ("channel.k8s.io", Ok(ok.clone()), ""),
            (
                "v3.channel.k8s.io",
                Ok(three.clone()),
                "command terminated with non-zero exit code: command 'sh -c exit 3' exited with 3",
            ),
        ];
        for (protocol, result, error) in cases {
            let ended = ended(protocol, &command("sh -c exit 3"), result);
            assert_eq!(String::from_utf8_lossy(&ended.error), error, "{protocol}");
        }
    }

    #[test]
    fn options_and_containers_are_checked_as_kube_apiserver_does() {
        type Parsed<'a> = Result<(Vec<&'a str>, &'a str, Streams), &'a str>;
        let cases: &[(&str, Parsed)] = &[
            (
                "command=sh&command=-c&command=exit%203&container=c&stdout=true&stderr=true",
                Ok((
                    vec!["sh", "-c", "exit 3"],
                    "c",
                    Streams {
                        stdout: true,
                        stderr: true,
                        ..Streams::default()
                    },
                )),
            ),
            (
                "command=cat&stdin=true&stdout=1",
                Ok((
                    vec!["cat"],
                    "",
                    Streams {
                        stdin: true,
                        stdout: true,
                        ..Streams::default()
                    },
                )),
            ),
            (
                "command=ls",
                Err("you must specify at least 1 of stdin, stdout, stderr"),
            ),
            (
                "stdout=true",
                Err("you must specify at least one command for the container"),
            ),
        ];
        for (query, expected) in cases {
            let parsed = ExecOptions::parse(Some(query));
            match (parsed, expected) {
                (Ok(options), Ok((command, container, streams))) => {
                    assert_eq!(options.command, *command, "{query}");
                    assert_eq!(options.container, *container, "{query}");
                    assert_eq!(options.streams, *streams, "{query}");
                }
                (Err(error), Err(message)) => assert_eq!(error.message, *message, "{query}"),
                (other, _) => panic!("{query}: {other:?}"),
            }
        }
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
            "containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "init"}]},
            "status": {"phase": "Running"}});
        let cases: &[(Value, &str, Result<&str, &str>)] = &[
            (pod.clone(), "b", Ok("b")),
            (pod.clone(), "init", Ok("init")),
            (pod.clone(), "z", Err("container z is not valid for pod p")),
            (
                pod.clone(),
                "",
                Err("a container name must be specified for pod p, choose one of: [a b]"),
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "a"}]}}),
                "",
                Ok("a"),
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}),
                "a",
                Err("pod p does not have a host assigned"),
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "a"}]},
                    "status": {"phase": "Succeeded"}}),
                "a",
                Err("cannot exec into a container in a completed pod; current phase is Succeeded"),
            ),
        ];
        for (pod, requested, expected) in cases {
            let got = container_of(pod, requested).map_err(|e| e.message);
            assert_eq!(
                got.as_deref().map_err(String::as_str),
                *expected,
                "{requested}"
            );
        }
        assert_eq!(
            Streams {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: false
            }
            .expected(),
            vec!["error", "stdin", "stdout"]
        );
        let terminal = Streams {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: true,
        };
        assert_eq!(
            terminal.expected(),
            vec!["error", "stdin", "stdout", "resize"]
        );
    }
}
