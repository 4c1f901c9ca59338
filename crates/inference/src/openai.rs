//! What a simulated model server answers over HTTP, and the seam the dataplane reaches model
//! servers through.
//!
//! [`answer`] serves a [`LiveServer`]'s routes as vLLM's OpenAI server does: `GET /metrics`
//! (the exposition [`crate::metrics`] writes), `GET /v1/models`, `GET /health`, and
//! `POST /v1/completions` and `/v1/chat/completions` — the request is queued on the engine
//! (its prompt's length estimated at 4 characters a token, as the endpoint picker estimates it,
//! its text cut into the blocks prefix caching shares) and answered at once with the OpenAI
//! response shape and its `usage`; the work it represents keeps the server busy for its
//! simulated time. Errors are vLLM's: an unknown model is 404 `NotFoundError` ("The model `x`
//! does not exist."), a body that is not a request 400 `BadRequestError`.
//!
//! [`ModelServers`] is what a dataplane asks: a pod's answer to a request, a pod's load, and a
//! pool's pick (the shell keeps the servers and the pickers' state). Knows nothing of sockets
//! or of where servers live.

use serde_json::{Value, json};

use crate::engine::Job;
use crate::metrics::EndpointMetrics;
use crate::picker::PickRequest;
use crate::prefix::{MAX_PREFIX_BLOCKS, text_block_hashes};
use crate::server::LiveServer;

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    pub status: u16,
    pub content_type: &'static str,
    /// Headers besides the content type.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpAnswer {
    fn json(status: u16, body: Value) -> HttpAnswer {
        HttpAnswer {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

/// The model servers a dataplane can reach.
pub trait ModelServers {
    /// `pod`'s model server's answer to a request on `port` (None: the connection reached
    /// the pod through a translation that chose the port); None when the pod runs none there.
    fn serve(
        &self,
        pod: &Value,
        port: Option<u16>,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Option<HttpAnswer>;

    /// `pod`'s model server's load now; None when it runs none.
    fn load(&self, pod: &Value) -> Option<EndpointMetrics>;

    /// The endpoint picker of `pool` (`namespace/name`) choosing among `candidates` (the
    /// caller's id, load), keeping its prefix index between requests.
    fn pick(
        &self,
        pool: &str,
        request: PickRequest<'_>,
        candidates: &[(u64, EndpointMetrics)],
    ) -> Option<u64>;
}

/// No model servers anywhere.
pub struct NoModelServers;

impl ModelServers for NoModelServers {
    fn serve(&self, _: &Value, _: Option<u16>, _: &str, _: &str, _: &[u8]) -> Option<HttpAnswer> {
        None
    }

    fn load(&self, _: &Value) -> Option<EndpointMetrics> {
        None
    }

    fn pick(&self, _: &str, _: PickRequest<'_>, _: &[(u64, EndpointMetrics)]) -> Option<u64> {
        None
    }
}

/// A completion request read from its body: the model it names and its prompt text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    pub model: String,
    pub prompt: String,
    pub max_tokens: u32,
    pub chat: bool,
}

/// The default `max_tokens` of OpenAI's completions API, which vLLM keeps.
const DEFAULT_MAX_TOKENS: u32 = 16;

fn bad_request(message: &str) -> HttpAnswer {
    HttpAnswer::json(
        400,
        json!({"object": "error", "message": message, "type": "BadRequestError",
               "param": null, "code": 400}),
    )
}

/// Reads a `/v1/completions` (`prompt`: a string or strings) or `/v1/chat/completions`
/// (`messages`' contents) body.
pub fn read_request(body: &[u8], chat: bool) -> Result<CompletionRequest, String> {
    let parsed: Value =
        serde_json::from_slice(body).map_err(|e| format!("the request body is not JSON: {e}"))?;
    let model = parsed["model"]
        .as_str()
        .filter(|m| !m.is_empty())
        .ok_or("model: Field required")?
        .to_string();
    let prompt = if chat {
        let messages = parsed["messages"]
            .as_array()
            .ok_or("messages: Field required")?;
        messages
            .iter()
            .map(|m| match &m["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        match &parsed["prompt"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(""),
            _ => return Err("prompt: Field required".into()),
        }
    };
    let max_tokens = match parsed
        .get("max_completion_tokens")
        .or_else(|| parsed.get("max_tokens"))
    {
        None | Some(Value::Null) => DEFAULT_MAX_TOKENS,
        Some(value) => value
            .as_u64()
            .filter(|n| *n >= 1)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or("max_tokens: must be an integer of at least 1")?,
    };
    Ok(CompletionRequest {
        model,
        prompt,
        max_tokens,
        chat,
    })
}

/// The prompt's length in tokens, as the picker estimates it (4 characters a token).
pub fn prompt_tokens(prompt: &str) -> u32 {
    u32::try_from(prompt.len().div_ceil(4))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// The words a simulated completion is made of.
const WORDS: [&str; 8] = [
    "Tessera",
    "simulates",
    "this",
    "answer",
    "one",
    "token",
    "per",
    "word.",
];

fn completion_text(tokens: u32) -> String {
    (0..tokens as usize)
        .map(|i| WORDS[i % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// The server's answer to one request at `now_us` (its clock) and `unix_seconds` (for
/// `created`); `id` names the completion.
pub fn answer(
    server: &mut LiveServer,
    now_us: u64,
    unix_seconds: u64,
    method: &str,
    path: &str,
    body: &[u8],
) -> HttpAnswer {
    let path = path.split('?').next().unwrap_or(path);
    match (method, path) {
        ("GET", "/metrics") => {
            let model = server.spec().models.first().cloned().unwrap_or_default();
            HttpAnswer {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                headers: Vec::new(),
                body: server.metrics(now_us).render(&model, unix_seconds as f64),
            }
        }
        ("GET", "/health") => HttpAnswer {
            status: 200,
            content_type: "application/json",
            headers: Vec::new(),
            body: String::new(),
        },
        ("GET", "/v1/models") => {
            let spec = server.spec();
            let base = spec.models.first().cloned().unwrap_or_default();
            let data: Vec<Value> = spec
                .models
                .iter()
                .map(|m| json!({"id": m, "object": "model", "owned_by": "vllm", "root": base, "parent": null}))
                .chain(spec.adapters.iter().map(|a| {
                    json!({"id": a, "object": "model", "owned_by": "vllm", "root": a, "parent": base})
                }))
                .collect();
            HttpAnswer::json(200, json!({"object": "list", "data": data}))
        }
        ("POST", "/v1/completions") | ("POST", "/v1/chat/completions") => {
            let chat = path == "/v1/chat/completions";
            let request = match read_request(body, chat) {
                Ok(request) => request,
                Err(message) => return bad_request(&message),
            };
            if !server.spec().serves(&request.model) {
                return HttpAnswer::json(
                    404,
                    json!({"object": "error",
                           "message": format!("The model `{}` does not exist.", request.model),
                           "type": "NotFoundError", "param": null, "code": 404}),
                );
            }
            let prompt = prompt_tokens(&request.prompt);
            let (blocks, _) = text_block_hashes(&request.model, &request.prompt, usize::MAX);
            let adapter = server.spec().adapter_of(&request.model);
            server.submit(
                now_us,
                Job {
                    id: 0,
                    adapter,
                    prompt_tokens: prompt,
                    output_tokens: request.max_tokens,
                    blocks,
                },
            );
            let id = format!("{}-{:x}", if chat { "chatcmpl" } else { "cmpl" }, now_us);
            let text = completion_text(request.max_tokens);
            let usage = json!({"prompt_tokens": prompt, "total_tokens": prompt + request.max_tokens,
                               "completion_tokens": request.max_tokens});
            let choice = if chat {
                json!({"index": 0, "message": {"role": "assistant", "content": text},
                       "logprobs": null, "finish_reason": "length"})
            } else {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": "length"})
            };
            let mut answer = HttpAnswer::json(
                200,
                json!({"id": id, "object": if chat { "chat.completion" } else { "text_completion" },
                       "created": unix_seconds, "model": request.model,
                       "choices": [choice], "usage": usage}),
            );
            answer.headers = server.spec().identity_headers.clone();
            answer
        }
        (_, "/metrics" | "/health" | "/v1/models" | "/v1/completions" | "/v1/chat/completions") => {
            HttpAnswer::json(405, json!({"detail": "Method Not Allowed"}))
        }
        _ => HttpAnswer::json(404, json!({"detail": "Not Found"})),
    }
}

/// The blocks a picker indexes for a request body (upstream's `hashPrompt`, partial block
/// included), and the model it names; None when the body is no completion request.
pub fn pick_key(body: &[u8], chat: bool) -> Option<(String, Vec<u64>)> {
    let request = read_request(body, chat).ok()?;
    let (mut blocks, partial) =
        text_block_hashes(&request.model, &request.prompt, MAX_PREFIX_BLOCKS);
    blocks.extend(partial);
    Some((request.model, blocks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::server_of;

    fn live() -> LiveServer {
        let pod = json!({"spec": {"containers": [{"name": "vllm-sim",
            "image": "ghcr.io/llm-d/llm-d-inference-sim:latest",
            "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-loras", "2",
                     "--lora-modules", "{\"name\": \"food-review-1\"}"]}]}});
        LiveServer::new(server_of(&pod).expect("a model server"), 0)
    }

    #[test]
    fn a_completion_is_answered_in_openais_shape_and_loads_the_server() {
        let mut server = live();
        let body = br#"{"model": "food-review-1", "prompt": "Write as if you were a critic: San Francisco", "max_tokens": 100}"#;
        let answer = answer(
            &mut server,
            10,
            1_700_000_000,
            "POST",
            "/v1/completions",
            body,
        );
        assert_eq!(answer.status, 200);
        let parsed: Value = serde_json::from_str(&answer.body).expect("json");
        assert_eq!(parsed["object"], "text_completion");
        assert_eq!(parsed["model"], "food-review-1");
        assert_eq!(parsed["created"], 1_700_000_000);
        assert_eq!(
            parsed["usage"],
            json!({"prompt_tokens": 11, "completion_tokens": 100, "total_tokens": 111})
        );
        assert_eq!(parsed["choices"][0]["finish_reason"], "length");
        let load = server.metrics(11);
        assert_eq!(load.running, 1);
        assert_eq!(
            load.active_adapters.iter().collect::<Vec<_>>(),
            ["food-review-1"]
        );
        let metrics = super::answer(&mut server, 12, 1_700_000_000, "GET", "/metrics", b"");
        assert!(metrics.body.contains(
            "vllm:num_requests_running{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 1"
        ));
        assert!(
            metrics
                .body
                .contains("running_lora_adapters=\"food-review-1\"")
        );
    }

    #[test]
    fn chat_models_and_errors_answer_as_vllm_does() {
        let mut server = live();
        let chat = br#"{"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "hi"}]}"#;
        let answer_chat = answer(&mut server, 0, 1, "POST", "/v1/chat/completions", chat);
        let parsed: Value = serde_json::from_str(&answer_chat.body).expect("json");
        assert_eq!(parsed["object"], "chat.completion");
        assert_eq!(parsed["choices"][0]["message"]["role"], "assistant");
        assert_eq!(
            parsed["usage"]["completion_tokens"], 16,
            "OpenAI's default max_tokens"
        );

        let models = answer(&mut server, 0, 1, "GET", "/v1/models", b"");
        let parsed: Value = serde_json::from_str(&models.body).expect("json");
        let ids: Vec<&str> = parsed["data"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|m| m["id"].as_str())
            .collect();
        assert_eq!(ids, ["meta-llama/Llama-3.1-8B-Instruct", "food-review-1"]);

        let cases: [(&str, &str, &[u8], u16, &str); 6] = [
            (
                "POST",
                "/v1/completions",
                br#"{"model": "gpt-4", "prompt": "x"}"#,
                404,
                "The model `gpt-4` does not exist.",
            ),
            ("POST", "/v1/completions", b"not json", 400, "not JSON"),
            (
                "POST",
                "/v1/completions",
                br#"{"prompt": "x"}"#,
                400,
                "model: Field required",
            ),
            (
                "POST",
                "/v1/completions",
                br#"{"model": "food-review-1", "prompt": "x", "max_tokens": 0}"#,
                400,
                "max_tokens",
            ),
            ("GET", "/v1/completions", b"", 405, "Method Not Allowed"),
            ("GET", "/nowhere", b"", 404, "Not Found"),
        ];
        for (method, path, body, status, text) in cases {
            let got = answer(&mut server, 0, 1, method, path, body);
            assert_eq!(got.status, status, "{method} {path}");
            assert!(got.body.contains(text), "{method} {path}: {}", got.body);
        }
        assert_eq!(
            server.metrics(0).running + server.metrics(0).waiting,
            1,
            "errors queue nothing"
        );
    }

    #[test]
    fn the_pick_key_indexes_the_prompt_text_with_its_partial_block() {
        let body = format!(r#"{{"model": "m", "prompt": "{}"}}"#, "a".repeat(100));
        let (model, blocks) = pick_key(body.as_bytes(), false).expect("a request");
        assert_eq!(model, "m");
        assert_eq!(blocks.len(), 2, "64 bytes, then a 36-byte partial block");
        assert_eq!(pick_key(b"{}", false), None);
    }
}
