//! Model-server pods: which containers are simulated vLLM servers, what their command line
//! configures, and one such server living on a clock its caller reads.
//!
//! A container is a model server when it runs vLLM's OpenAI server (the `vllm/vllm-openai`
//! image, `python3 -m vllm.entrypoints.openai.api_server`, or `vllm serve MODEL`) or llm-d's
//! inference simulator (`llm-d-inference-sim`, which upstream's quickstart uses). Its arguments
//! are read as vLLM reads them: `--model` (or `serve`'s positional model), `--served-model-name`,
//! `--port` (8000), `--max-num-seqs` (and argparse's `--max-num-seq` abbreviation),
//! `--max-num-batched-tokens`, `--enable-lora`, `--max-loras` (1 by default once LoRA is on;
//! the simulator's flag alone enables it) and `--lora-modules` (`name=path` or the JSON form).
//! [`LiveServer`] is an [`Engine`] advanced to whatever time its caller gives, so a shell can
//! step it lazily from a wall clock.
//!
//! Knows nothing of pods' lifecycles, sockets or wall time.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::engine::{Engine, EngineConfig, Job, Outcome};
use crate::metrics::EndpointMetrics;

/// What a model-server container serves and how it is sized.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    /// The container's name.
    pub container: String,
    /// The names requests may give for the base model.
    pub models: Vec<String>,
    /// The LoRA adapters it serves.
    pub adapters: BTreeSet<String>,
    pub port: u16,
    pub engine: EngineConfig,
    /// Headers its completions carry: llm-d's simulator names its pod, port and namespace
    /// (`x-inference-pod`, `x-inference-port`, `x-inference-namespace`) when its `POD_NAME`
    /// and `POD_NAMESPACE` variables are set.
    pub identity_headers: Vec<(String, String)>,
}

impl ServerSpec {
    /// Whether `model` is one this server answers.
    pub fn serves(&self, model: &str) -> bool {
        self.models.iter().any(|m| m == model) || self.adapters.contains(model)
    }

    /// The adapter `model` names, None for the base model.
    pub fn adapter_of(&self, model: &str) -> Option<String> {
        self.adapters.contains(model).then(|| model.to_string())
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn is_model_server(image: &str, argv: &[String]) -> bool {
    let image = image.rsplit('/').next().unwrap_or(image);
    let image = image.split([':', '@']).next().unwrap_or(image);
    image == "vllm-openai"
        || image == "llm-d-inference-sim"
        || argv
            .iter()
            .any(|a| a == "vllm.entrypoints.openai.api_server")
        || argv
            .windows(2)
            .any(|w| w[0].ends_with("vllm") && w[1] == "serve")
}

/// The values after a flag: `--flag v` or `--flag=v`, and for list flags every following
/// word up to the next `--`.
fn flag_values(argv: &[String], names: &[&str], list: bool) -> Option<Vec<String>> {
    let mut found = None;
    let mut i = 0;
    while i < argv.len() {
        let word = &argv[i];
        if let Some((name, value)) = word.split_once('=')
            && names.contains(&name)
        {
            found = Some(vec![value.to_string()]);
        } else if names.contains(&word.as_str()) {
            let mut values = Vec::new();
            let mut j = i + 1;
            while j < argv.len() && !argv[j].starts_with("--") {
                values.push(argv[j].clone());
                j += 1;
                if !list {
                    break;
                }
            }
            found = Some(values);
        }
        i += 1;
    }
    found
}

fn number(argv: &[String], names: &[&str]) -> Option<u32> {
    flag_values(argv, names, false)?.first()?.parse().ok()
}

fn adapter_name(module: &str) -> Option<String> {
    let module = module.trim();
    if module.starts_with('{') {
        let parsed: Value = serde_json::from_str(module).ok()?;
        return parsed["name"].as_str().map(String::from);
    }
    let name = module.split_once('=').map_or(module, |(name, _)| name);
    (!name.is_empty()).then(|| name.to_string())
}

/// The model server a pod runs, if any (its first model-server container).
pub fn server_of(pod: &Value) -> Option<ServerSpec> {
    // In a LeaderWorkerSet group only the leader serves; its workers join its Ray cluster.
    let worker_index = &pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"];
    if worker_index.as_str().is_some_and(|index| index != "0") {
        return None;
    }
    let (container, mut spec) = pod["spec"]["containers"]
        .as_array()?
        .iter()
        .find_map(|c| Some((c, server_of_container(c)?)))?;
    let image = container["image"].as_str().unwrap_or_default();
    if image.contains("llm-d-inference-sim") {
        let env = |name: &str| env_value(pod, container, name);
        if let Some(pod_name) = env("POD_NAME") {
            spec.identity_headers = vec![
                ("x-inference-pod".into(), pod_name),
                ("x-inference-port".into(), spec.port.to_string()),
            ];
        }
        if let Some(namespace) = env("POD_NAMESPACE") {
            spec.identity_headers
                .push(("x-inference-namespace".into(), namespace));
        }
    }
    Some(spec)
}

/// A container's environment variable as the kubelet sets it: a literal value, or a
/// `fieldRef` to the pod's name or namespace.
fn env_value(pod: &Value, container: &Value, name: &str) -> Option<String> {
    let var = container["env"]
        .as_array()?
        .iter()
        .find(|v| v["name"].as_str() == Some(name))?;
    if let Some(value) = var["value"].as_str() {
        return Some(value.to_string());
    }
    let field = var["valueFrom"]["fieldRef"]["fieldPath"].as_str()?;
    match field {
        "metadata.name" => pod["metadata"]["name"].as_str().map(String::from),
        "metadata.namespace" => pod["metadata"]["namespace"].as_str().map(String::from),
        _ => None,
    }
    .filter(|v| !v.is_empty())
}

/// The container's command line as words; a `sh -c` script's words are read too (trailing
/// `;` and quotes dropped), so a server started inside a script is found with its flags.
fn command_words(container: &Value) -> Vec<String> {
    let mut argv = strings(&container["command"]);
    argv.extend(strings(&container["args"]));
    let mut previous_was_dash_c = false;
    argv.into_iter()
        .flat_map(|word| {
            let script = std::mem::replace(&mut previous_was_dash_c, word == "-c");
            if script {
                word.split_whitespace()
                    .map(|w| {
                        w.trim_matches(|c| c == ';' || c == '"' || c == '\'')
                            .to_string()
                    })
                    .filter(|w| !w.is_empty())
                    .collect()
            } else {
                vec![word]
            }
        })
        .collect()
}

fn server_of_container(container: &Value) -> Option<ServerSpec> {
    let argv = command_words(container);
    let image = container["image"].as_str().unwrap_or_default();
    if !is_model_server(image, &argv) {
        return None;
    }
    let positional = argv
        .windows(2)
        .find(|w| w[0] == "serve")
        .map(|w| w[1].clone())
        .filter(|m| !m.starts_with("--"));
    let model = flag_values(&argv, &["--model"], false)
        .and_then(|v| v.into_iter().next())
        .or(positional)
        .unwrap_or_else(|| "facebook/opt-125m".into());
    let models = flag_values(&argv, &["--served-model-name"], true)
        .filter(|names| !names.is_empty())
        .unwrap_or_else(|| vec![model]);
    let adapters: BTreeSet<String> = flag_values(&argv, &["--lora-modules"], true)
        .unwrap_or_default()
        .iter()
        .filter_map(|m| adapter_name(m))
        .collect();
    let lora_enabled = argv.iter().any(|a| a == "--enable-lora")
        || argv.iter().any(|a| a.starts_with("--max-loras"));
    let defaults = EngineConfig::default();
    let engine = EngineConfig {
        max_num_seqs: number(&argv, &["--max-num-seqs", "--max-num-seq"])
            .filter(|n| *n > 0)
            .unwrap_or(defaults.max_num_seqs),
        max_batched_tokens: number(&argv, &["--max-num-batched-tokens"])
            .filter(|n| *n > 0)
            .unwrap_or(defaults.max_batched_tokens),
        max_loras: if lora_enabled {
            number(&argv, &["--max-loras"]).unwrap_or(1)
        } else {
            0
        },
        ..defaults
    };
    let port = number(&argv, &["--port"])
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(8000);
    Some(ServerSpec {
        container: container["name"].as_str().unwrap_or_default().to_string(),
        models,
        adapters,
        port,
        engine,
        identity_headers: Vec::new(),
    })
}

/// A server advanced to the time its caller gives (µs on any monotonic scale).
#[derive(Debug, Clone)]
pub struct LiveServer {
    spec: ServerSpec,
    engine: Engine,
    now_us: u64,
    step_end_us: Option<u64>,
    next_id: usize,
    completed: u64,
}

impl LiveServer {
    pub fn new(spec: ServerSpec, now_us: u64) -> LiveServer {
        LiveServer {
            engine: Engine::new(spec.engine.clone()),
            spec,
            now_us,
            step_end_us: None,
            next_id: 0,
            completed: 0,
        }
    }

    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// Requests finished so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Runs every step that ends by `now_us`; time never goes back.
    pub fn advance(&mut self, now_us: u64) {
        let target = now_us.max(self.now_us);
        loop {
            match self.step_end_us {
                Some(end) if end <= target => {
                    for outcome in self.engine.finish_step() {
                        if matches!(outcome, Outcome::Finished { .. }) {
                            self.completed += 1;
                        }
                    }
                    self.now_us = end;
                    self.step_end_us = self
                        .engine
                        .start_step()
                        .map(|length| end + (length.round() as u64).max(1));
                }
                Some(_) => break,
                None => {
                    self.step_end_us = self
                        .engine
                        .start_step()
                        .map(|length| self.now_us + (length.round() as u64).max(1));
                    if self.step_end_us.is_none() {
                        break;
                    }
                }
            }
        }
        self.now_us = target;
    }

    /// Queues a request at `now_us`.
    pub fn submit(&mut self, now_us: u64, mut job: Job) {
        self.advance(now_us);
        job.id = self.next_id;
        self.next_id += 1;
        self.engine.enqueue(job);
        self.advance(now_us);
    }

    /// The load at `now_us`.
    pub fn metrics(&mut self, now_us: u64) -> EndpointMetrics {
        self.advance(now_us);
        self.engine.metrics()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(image: &str, command: Value, args: Value) -> Value {
        json!({"name": "server", "image": image, "command": command, "args": args})
    }

    #[test]
    fn recognises_upstreams_model_server_manifests() {
        // config/manifests/vllm/gpu-deployment.yaml
        let vllm = container(
            "vllm/vllm-openai:latest",
            json!(["python3", "-m", "vllm.entrypoints.openai.api_server"]),
            json!([
                "--model",
                "Qwen/Qwen3-32B",
                "--tensor-parallel-size",
                "1",
                "--port",
                "8000",
                "--max-num-seq",
                "1024",
                "--max-model-len",
                "16000",
                "--enable-lora",
                "--max-loras",
                "2",
                "--max-lora-rank",
                "8",
                "--max-cpu-loras",
                "12"
            ]),
        );
        let spec = server_of_container(&vllm).expect("a model server");
        assert_eq!(spec.models, ["Qwen/Qwen3-32B"]);
        assert_eq!(spec.port, 8000);
        assert_eq!(spec.engine.max_num_seqs, 1024, "argparse's abbreviation");
        assert_eq!(spec.engine.max_loras, 2);
        assert!(spec.adapters.is_empty());

        // config/manifests/vllm/sim-deployment.yaml
        let sim = container(
            "ghcr.io/llm-d/llm-d-inference-sim:latest",
            Value::Null,
            json!([
                "--model",
                "dummy-model-name",
                "--port",
                "8000",
                "--max-loras",
                "2",
                "--lora-modules",
                "{\"name\": \"food-review-1\"}"
            ]),
        );
        let spec = server_of_container(&sim).expect("a model server");
        assert_eq!(spec.models, ["dummy-model-name"]);
        assert_eq!(spec.adapters.iter().collect::<Vec<_>>(), ["food-review-1"]);
        assert_eq!(spec.engine.max_loras, 2);
        assert!(spec.serves("food-review-1") && spec.serves("dummy-model-name"));
        assert!(!spec.serves("other"));
        assert_eq!(
            spec.adapter_of("food-review-1").as_deref(),
            Some("food-review-1")
        );
        assert_eq!(spec.adapter_of("dummy-model-name"), None);
    }

    #[test]
    fn llm_ds_simulator_names_its_pod_when_its_variables_are_set() {
        let pod = json!({"metadata": {"name": "vllm-qwen3-32b-0", "namespace": "serve"},
            "spec": {"containers": [{"name": "vllm-sim",
                "image": "ghcr.io/llm-d/llm-d-inference-sim:latest",
                "args": ["--model", "m", "--port", "8000"],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "POD_NAMESPACE", "value": "literal-ns"}]}]}});
        let spec = server_of(&pod).expect("a model server");
        assert_eq!(
            spec.identity_headers,
            [
                (
                    "x-inference-pod".to_string(),
                    "vllm-qwen3-32b-0".to_string()
                ),
                ("x-inference-port".to_string(), "8000".to_string()),
                (
                    "x-inference-namespace".to_string(),
                    "literal-ns".to_string()
                )
            ]
        );
        let mut quiet = pod.clone();
        quiet["spec"]["containers"][0]["env"] = json!([]);
        assert!(
            server_of(&quiet)
                .expect("a model server")
                .identity_headers
                .is_empty()
        );
    }

    #[test]
    fn reads_vllm_serve_and_its_list_flags() {
        let serve = container(
            "registry.local/my-vllm:0.9",
            json!(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]),
            json!([
                "--served-model-name",
                "llama",
                "llama-3.1",
                "--port=9000",
                "--enable-lora",
                "--lora-modules",
                "sql=/a/sql",
                "chat=/a/chat",
                "--max-num-seqs",
                "64"
            ]),
        );
        let spec = server_of_container(&serve).expect("a model server");
        assert_eq!(spec.models, ["llama", "llama-3.1"]);
        assert_eq!(spec.port, 9000);
        assert_eq!(
            spec.engine.max_loras, 1,
            "vLLM's default once LoRA is enabled"
        );
        assert_eq!(spec.engine.max_num_seqs, 64);
        assert_eq!(spec.adapters.iter().collect::<Vec<_>>(), ["chat", "sql"]);
    }

    #[test]
    fn in_a_leader_worker_set_only_the_leader_serves() {
        // LWS's vLLM example: the server starts inside the leader's script.
        let script = "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader \
                      --ray_cluster_size=$(LWS_GROUP_SIZE); python3 -m vllm.entrypoints.openai.api_server \
                      --port 8080 --model meta-llama/Meta-Llama-3.1-405B-Instruct --tensor-parallel-size 8";
        let pod = |index: &str| {
            json!({"metadata": {"labels": {"leaderworkerset.sigs.k8s.io/worker-index": index}},
                   "spec": {"containers": [{"name": "vllm-leader", "image": "vllm/vllm-openai:latest",
                                             "command": ["sh", "-c", script]}]}})
        };
        let leader = server_of(&pod("0")).expect("the leader serves");
        assert_eq!(leader.port, 8080);
        assert_eq!(leader.models, ["meta-llama/Meta-Llama-3.1-405B-Instruct"]);
        assert_eq!(server_of(&pod("1")), None, "a worker does not");
    }

    #[test]
    fn other_containers_are_not_model_servers() {
        for c in [
            container("nginx:1.27", Value::Null, Value::Null),
            container(
                "registry.k8s.io/e2e-test-images/agnhost:2.53",
                Value::Null,
                json!(["netexec"]),
            ),
            container(
                "python:3.12",
                json!(["python3", "-m", "http.server"]),
                Value::Null,
            ),
        ] {
            assert_eq!(server_of_container(&c), None, "{c}");
        }
        let pod = json!({"spec": {"containers": [
            {"name": "sidecar", "image": "busybox"},
            {"name": "vllm", "image": "vllm/vllm-openai:v0.9.1"}]}});
        let spec = server_of(&pod).expect("the second container");
        assert_eq!(spec.container, "vllm");
        assert_eq!(spec.models, ["facebook/opt-125m"], "vLLM's default model");
        assert_eq!(spec.engine.max_loras, 0, "LoRA off by default");
    }

    fn job(prompt: u32, output: u32) -> Job {
        Job {
            id: 0,
            adapter: None,
            prompt_tokens: prompt,
            output_tokens: output,
            blocks: Vec::new(),
        }
    }

    #[test]
    fn a_live_server_works_off_its_queue_as_time_passes() {
        let spec = server_of_container(&container("vllm/vllm-openai", Value::Null, Value::Null))
            .expect("a model server");
        let mut server = LiveServer::new(spec, 1_000);
        for _ in 0..3 {
            server.submit(1_000, job(100, 50));
        }
        let first = server.metrics(1_000);
        assert_eq!(
            (first.running, first.waiting),
            (1, 2),
            "the first one's step is under way; the others join the next"
        );
        // 8 ms + 100 prompt tokens × 60 µs for the first step.
        let busy = server.metrics(1_000 + 14_000);
        assert_eq!((busy.running, busy.waiting), (3, 0));
        // Then about 50 decode steps of about 8.2 ms.
        let later = server.metrics(1_000 + 200_000);
        assert_eq!(later.running, 3, "still decoding at 200 ms");
        let done = server.metrics(1_000 + 1_000_000);
        assert_eq!((done.running, done.waiting), (0, 0));
        assert_eq!(server.completed(), 3);
        assert_eq!(done.kv_cache_usage, 0.0);
        let earlier = server.metrics(5);
        assert_eq!(earlier, done, "time never goes back");
    }
}
