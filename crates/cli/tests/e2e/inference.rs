//! Inference-aware routing end to end with the real kubectl (bundled 1.33, and 1.27 for reads
//! and execs): the repository's `examples/serving` manifests — three llm-d simulator pods, an
//! InferencePool over them, a Gateway and an HTTPRoute to the pool — applied unchanged; the
//! pool's status names the Gateway (Accepted, ResolvedRefs); completions sent with `kubectl
//! exec … -- curl` through the Gateway are answered by the pool's pods in OpenAI's shape, and
//! the endpoint picker keeps one system prompt on one pod (prefix affinity) while different
//! prompts spread; a pod's `/metrics` shows its load in vLLM's names; an unknown model is
//! vLLM's 404; a pool selecting no ready pods is the Gateway's 503; a pool whose
//! `endpointPickerRef` names no Service is ResolvedRefs=False InvalidExtensionRef; upstream's
//! CEL rules refuse duplicate ports.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support::Cluster;

use crate::support::TWO_CPU_NODES as TOPOLOGY;

const V: &str = "1.33";
const OLD: &str = "1.27";
const POOL: &str = "vllm-llama3-8b-instruct";

fn example(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../examples/serving/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("an example manifest")
}

fn jsonpath(cluster: &Cluster, kind: &str, name: &str, path: &str) -> String {
    cluster.ok(V, &["get", kind, name, "-o", &format!("jsonpath={path}")])
}

/// `curl` in the client pod; returns (headers, body) of the answer.
fn curl(cluster: &Cluster, version: &str, args: &[&str]) -> (String, String) {
    let mut argv = vec!["exec", "client", "--", "curl", "-si"];
    argv.extend_from_slice(args);
    let out = cluster.ok(version, &argv);
    let (head, body) = out
        .split_once("\r\n\r\n")
        .or_else(|| out.split_once("\n\n"))
        .unwrap_or((&out, ""));
    (head.to_string(), body.to_string())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

fn completion(cluster: &Cluster, gateway: &str, prompt: &str) -> (String, Value) {
    let body = format!(
        r#"{{"model": "food-review-1", "prompt": "{prompt}", "max_tokens": 40, "temperature": 0}}"#
    );
    let url = format!("http://{gateway}/v1/completions");
    let (head, text) = curl(
        cluster,
        V,
        &[&url, "-H", "Content-Type: application/json", "-d", &body],
    );
    assert!(head.contains(" 200"), "{head}\n{text}");
    let pod = header(&head, "x-inference-pod")
        .unwrap_or_else(|| panic!("no x-inference-pod in {head}"))
        .to_string();
    (pod, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn the_endpoint_picker_routes_completions_through_the_gateway_to_the_pools_pods() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 2);
    cluster.ok_stdin(V, &["apply", "-f", "-"], &example("model-servers.yaml"));
    cluster.ok_stdin(V, &["apply", "-f", "-"], &example("inferencepool.yaml"));
    cluster.ok_stdin(V, &["apply", "-f", "-"], &example("gateway.yaml"));
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: client}\nspec:\n  containers:\n  - {name: curl, image: curlimages/curl:8.5.0, command: [sleep, infinity]}\n",
    );

    // The pool's status names the Gateway once the route is accepted.
    let accepted = cluster.wait_for(
        V,
        &[
            "get",
            "inferencepool",
            POOL,
            "-o",
            "jsonpath={.status.parents[0].conditions[*].reason}",
        ],
        |out| out == "Accepted ResolvedRefs",
    );
    assert_eq!(accepted, "Accepted ResolvedRefs");
    assert_eq!(
        jsonpath(
            &cluster,
            "infpool",
            POOL,
            "{.status.parents[0].parentRef.name} {.status.parents[0].controllerName}"
        ),
        "inference-gateway tessera.dev/gateway-controller"
    );
    let route_refs = jsonpath(
        &cluster,
        "httproute",
        "llm-route",
        r#"{.status.parents[0].conditions[?(@.type=="ResolvedRefs")].status}"#,
    );
    assert_eq!(
        route_refs, "True",
        "an InferencePool is a backend the Gateway resolves"
    );
    let listed = cluster.ok(OLD, &["get", "inferencepools"]);
    assert!(listed.contains(POOL), "{listed}");

    // The model servers run and the Gateway has its address.
    cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "app=vllm-llama3-8b-instruct",
            "-o",
            "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}",
        ],
        |out| out.split_whitespace().filter(|s| *s == "True").count() == 3,
    );
    cluster.node_when_running(V, None, "client");
    let gateway = cluster.wait_for(
        V,
        &[
            "get",
            "gateway",
            "inference-gateway",
            "-o",
            "jsonpath={.status.addresses[0].value}",
        ],
        |out| !out.is_empty(),
    );

    // One system prompt stays on one pod: the picker's prefix index.
    let system = "You are a food critic who writes for a newspaper in San Francisco. ".repeat(4);
    let (first, answer) = completion(&cluster, &gateway, &format!("{system}Review the tacos."));
    assert_eq!(answer["object"], "text_completion");
    assert_eq!(answer["model"], "food-review-1");
    assert_eq!(answer["usage"]["completion_tokens"], 40);
    for dish in ["the ramen", "the burrito", "the dumplings"] {
        let (pod, _) = completion(&cluster, &gateway, &format!("{system}Review {dish}."));
        assert_eq!(pod, first, "a shared prefix goes where its blocks are");
    }
    // Prompts with nothing in common spread over the pool as load and ties decide.
    let mut by_pod: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..24 {
        let prompt = format!("{i} ").repeat(40);
        let (pod, _) = completion(&cluster, &gateway, &prompt);
        *by_pod.entry(pod).or_default() += 1;
    }
    assert!(
        by_pod.len() >= 2,
        "unrelated prompts all went to one pod: {by_pod:?}"
    );

    // A pod's load, in vLLM's metric names, straight from the pod.
    let pod_ip = jsonpath(&cluster, "pod", &first, "{.status.podIP}");
    let (head, metrics) = curl(&cluster, OLD, &[&format!("http://{pod_ip}:8000/metrics")]);
    assert!(head.contains(" 200"), "{head}");
    assert!(
        metrics
            .contains("vllm:num_requests_waiting{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("vllm:kv_cache_usage_perc"), "{metrics}");
    assert!(
        metrics.contains("vllm:lora_requests_info{max_lora=\"2\""),
        "{metrics}"
    );

    // An unknown model: vLLM's 404 through the Gateway.
    let (head, body) = curl(
        &cluster,
        V,
        &[
            &format!("http://{gateway}/v1/completions"),
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"model": "gpt-4", "prompt": "hi"}"#,
        ],
    );
    assert!(head.contains(" 404"), "{head}");
    assert!(body.contains("The model `gpt-4` does not exist."), "{body}");

    // A pool selecting no ready pods: the Gateway's 503.
    cluster.ok(V, &["scale", "deployment", POOL, "--replicas=0"]);
    cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "app=vllm-llama3-8b-instruct",
            "-o",
            "name",
        ],
        |out| out.trim().is_empty(),
    );
    let (head, body) = curl(
        &cluster,
        V,
        &[
            &format!("http://{gateway}/v1/completions"),
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"model": "food-review-1", "prompt": "hi"}"#,
        ],
    );
    assert!(head.contains(" 503"), "{head}");
    assert!(body.contains("no healthy upstream"), "{body}");

    // Bad input: a picker reference to nothing, and duplicate ports.
    cluster.ok(
        V,
        &["patch", "inferencepool", POOL, "--type=merge", "-p",
          r#"{"spec":{"endpointPickerRef":{"name":"vllm-llama3-8b-instruct-epp","port":{"number":9002}}}}"#],
    );
    let invalid = cluster.wait_for(
        V,
        &[
            "get",
            "inferencepool",
            POOL,
            "-o",
            r#"jsonpath={.status.parents[0].conditions[?(@.type=="ResolvedRefs")].reason}"#,
        ],
        |out| out == "InvalidExtensionRef",
    );
    assert_eq!(invalid, "InvalidExtensionRef");
    let refused = cluster.fails(
        V,
        &["apply", "-f", "-"],
        Some(
            &example("inferencepool.yaml")
                .replace("  - number: 8000\n", "  - number: 8000\n  - number: 8000\n"),
        ),
    );
    assert!(refused.contains("port number must be unique"), "{refused}");
}
