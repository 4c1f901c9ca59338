//! Request traces for `tessera bench serving`: read from JSON Lines, or generated from a
//! seed.
//!
//! One request per line: `{"at": 0.125, "model": "llama-3-8b", "prefix": "sys-3",
//! "prefixTokens": 2048, "promptTokens": 2300, "outputTokens": 180}` — when it arrives (seconds
//! from the start, never decreasing), the model or adapter it names, an optional shared prefix
//! (a system prompt several requests begin with) and its length, and the prompt's and the
//! answer's lengths in tokens. The generator draws arrivals as a Poisson process, prefixes
//! uniformly from a set, and adapters by Zipf's law (a few popular, a long tail), which is the
//! shape of the inference extension's prefix-cache and multi-LoRA benchmarks.
//!
//! Knows nothing of servers or routing.

use serde::{Deserialize, Serialize};

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceRequest {
    /// Arrival, seconds from the trace's start.
    pub at: f64,
    /// The base model or an adapter.
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefix_tokens: u32,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A trace line the reader refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace line {line}: {reason}")]
pub struct TraceError {
    pub line: usize,
    pub reason: String,
}

/// Reads a JSON Lines trace; blank lines and lines starting with `#` are skipped.
pub fn parse(text: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let mut requests: Vec<TraceRequest> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let error = |reason: String| TraceError { line, reason };
        let request: TraceRequest =
            serde_json::from_str(trimmed).map_err(|e| error(e.to_string()))?;
        if !request.at.is_finite() || request.at < 0.0 {
            return Err(error(format!("at: {} is not a time ≥ 0", request.at)));
        }
        if let Some(previous) = requests.last()
            && request.at < previous.at
        {
            return Err(error(format!(
                "at: {} is before the previous request's {}",
                request.at, previous.at
            )));
        }
        if request.model.is_empty() {
            return Err(error("model: must not be empty".into()));
        }
        if request.prompt_tokens == 0 {
            return Err(error("promptTokens: must be at least 1".into()));
        }
        if request.output_tokens == 0 {
            return Err(error("outputTokens: must be at least 1".into()));
        }
        if request.prefix_tokens > request.prompt_tokens {
            return Err(error(format!(
                "prefixTokens: {} is more than promptTokens {}",
                request.prefix_tokens, request.prompt_tokens
            )));
        }
        if request.prefix.is_none() && request.prefix_tokens > 0 {
            return Err(error("prefixTokens: given without a prefix".into()));
        }
        requests.push(request);
    }
    Ok(requests)
}

/// Writes a trace as JSON Lines.
pub fn render(requests: &[TraceRequest]) -> String {
    requests
        .iter()
        .filter_map(|r| serde_json::to_string(r).ok())
        .map(|line| line + "\n")
        .collect()
}

/// The shape of a generated trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub requests: usize,
    /// Mean arrivals per second.
    pub rate: f64,
    pub base_model: String,
    /// Shared system prompts to choose from (0: none).
    pub prefixes: u32,
    pub prefix_tokens: u32,
    /// The request's own part of the prompt: uniform in this range.
    pub question_tokens: (u32, u32),
    pub output_tokens: (u32, u32),
    /// Adapters besides the base model (0: every request asks the base model).
    pub adapters: u32,
    pub seed: u64,
}

impl Default for Workload {
    /// Many long system prompts and short questions over eight adapters: the case where
    /// where a request lands decides how much of its prompt is computed.
    fn default() -> Workload {
        Workload {
            requests: 4_000,
            rate: 40.0,
            base_model: "llama-3-8b".into(),
            prefixes: 64,
            prefix_tokens: 2_048,
            question_tokens: (64, 512),
            output_tokens: (32, 256),
            adapters: 8,
            seed: 1,
        }
    }
}

fn uniform(rng: &mut fastrand::Rng, (low, high): (u32, u32)) -> u32 {
    if high <= low {
        low
    } else {
        rng.u32(low..=high)
    }
}

/// Generates a trace; the same workload gives the same trace.
pub fn generate(workload: &Workload) -> Vec<TraceRequest> {
    let mut rng = fastrand::Rng::with_seed(workload.seed);
    // Zipf's law over the base model (rank 1) and the adapters.
    let weights: Vec<f64> = (0..=workload.adapters)
        .map(|rank| 1.0 / f64::from(rank + 1))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut at = 0.0;
    (0..workload.requests)
        .map(|_| {
            if workload.rate > 0.0 {
                // Exponential gaps; 1 − u keeps the logarithm finite.
                at += -(1.0 - rng.f64()).ln() / workload.rate;
            }
            let mut draw = rng.f64() * total;
            let mut rank = 0;
            while rank + 1 < weights.len() && draw >= weights[rank] {
                draw -= weights[rank];
                rank += 1;
            }
            let model = if rank == 0 {
                workload.base_model.clone()
            } else {
                format!("{}-adapter-{rank}", workload.base_model)
            };
            let (prefix, prefix_tokens) = if workload.prefixes > 0 {
                (
                    Some(format!("system-{}", rng.u32(0..workload.prefixes))),
                    workload.prefix_tokens,
                )
            } else {
                (None, 0)
            };
            let question = uniform(&mut rng, workload.question_tokens).max(1);
            TraceRequest {
                at: (at * 1e6).round() / 1e6,
                model,
                prefix,
                prefix_tokens,
                prompt_tokens: prefix_tokens + question,
                output_tokens: uniform(&mut rng, workload.output_tokens).max(1),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_generated_trace_reads_back_and_depends_only_on_its_seed() {
        let workload = Workload {
            requests: 200,
            ..Workload::default()
        };
        let trace = generate(&workload);
        assert_eq!(trace.len(), 200);
        assert_eq!(generate(&workload), trace);
        assert_ne!(
            generate(&Workload {
                seed: 2,
                ..workload.clone()
            }),
            trace
        );
        assert_eq!(parse(&render(&trace)), Ok(trace.clone()));
        let mean_gap = trace.last().map_or(0.0, |r| r.at) / 200.0;
        assert!(
            (0.015..0.035).contains(&mean_gap),
            "40/s means gaps near 25 ms, got {mean_gap}"
        );
        let base = trace.iter().filter(|r| r.model == "llama-3-8b").count();
        assert!(
            base > trace.iter().filter(|r| r.model.ends_with("-8")).count() * 3,
            "Zipf: the base model is far more popular than the last adapter"
        );
        assert!(trace.iter().all(|r| r.prompt_tokens > r.prefix_tokens));
    }

    #[test]
    fn bad_lines_are_named_with_their_field() {
        let good = r#"{"at":0,"model":"m","promptTokens":10,"outputTokens":5}"#;
        let cases = [
            (
                r#"{"at":-1,"model":"m","promptTokens":10,"outputTokens":5}"#,
                "at:",
            ),
            (
                r#"{"at":0,"model":"","promptTokens":10,"outputTokens":5}"#,
                "model:",
            ),
            (
                r#"{"at":0,"model":"m","promptTokens":0,"outputTokens":5}"#,
                "promptTokens:",
            ),
            (
                r#"{"at":0,"model":"m","promptTokens":1,"outputTokens":0}"#,
                "outputTokens:",
            ),
            (
                r#"{"at":0,"model":"m","prefix":"p","prefixTokens":20,"promptTokens":10,"outputTokens":5}"#,
                "prefixTokens: 20 is more",
            ),
            (
                r#"{"at":0,"model":"m","prefixTokens":2,"promptTokens":10,"outputTokens":5}"#,
                "without a prefix",
            ),
            (r#"{"at":0,"model":"m","promptTokens":10}"#, "outputTokens"),
            (
                r#"{"at":0,"model":"m","promptTokens":10,"outputTokens":5,"x":1}"#,
                "unknown field",
            ),
            ("not json", "expected"),
        ];
        for (line, reason) in cases {
            let error = parse(&format!("# header\n{good}\n\n{line}\n")).expect_err(line);
            assert_eq!(error.line, 4, "{line}");
            assert!(error.reason.contains(reason), "{line}: {error}");
        }
        let backwards = format!("{good}\n{}", good.replace("\"at\":0", "\"at\":2"))
            + "\n"
            + &good.replace("\"at\":0", "\"at\":1");
        let error = parse(&backwards).expect_err("goes back in time");
        assert_eq!(error.line, 3);
        assert!(error.reason.contains("before the previous request's 2"));
    }

    proptest! {
        #[test]
        fn no_input_panics(text in "\\PC{0,300}") {
            let _ = parse(&text);
        }
    }
}
