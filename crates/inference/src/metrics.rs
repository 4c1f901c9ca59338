//! What a model server reports about its load, as the endpoint picker reads it: the
//! model-server protocol's metrics in vLLM's names (`vllm:num_requests_waiting`,
//! `vllm:num_requests_running`, `vllm:kv_cache_usage_perc` — or the older
//! `vllm:gpu_cache_usage_perc` —, and `vllm:lora_requests_info` whose labels list the running
//! and waiting adapters and `max_lora`), parsed from and written as Prometheus text.
//!
//! Knows nothing of scraping, scoring or of how a server comes by its numbers.

use std::collections::BTreeSet;

/// One server's load, as the picker's scorers consume it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointMetrics {
    /// Requests queued, not yet running (`WaitingQueueSize`).
    pub waiting: u32,
    /// Requests in the running batch.
    pub running: u32,
    /// KV-cache blocks in use, 0 to 1 (`KVCacheUsagePercent`, a fraction despite its name).
    pub kv_cache_usage: f64,
    /// Adapters in the running batch (`ActiveModels`).
    pub active_adapters: BTreeSet<String>,
    /// Adapters of queued requests (`WaitingModels`).
    pub waiting_adapters: BTreeSet<String>,
    /// How many adapters may run at once (`MaxActiveModels`).
    pub max_adapters: u32,
}

/// A line of the exposition the parser could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metrics line {line}: {reason}")]
pub struct MetricsError {
    pub line: usize,
    pub reason: String,
}

const WAITING: &str = "vllm:num_requests_waiting";
const RUNNING: &str = "vllm:num_requests_running";
const KV_USAGE: &str = "vllm:kv_cache_usage_perc";
const KV_USAGE_OLD: &str = "vllm:gpu_cache_usage_perc";
const LORA_INFO: &str = "vllm:lora_requests_info";

/// A sample line split into its name, labels and value.
struct Sample<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    value: f64,
}

fn parse_labels(text: &str, line: usize) -> Result<Vec<(&str, String)>, MetricsError> {
    let error = |reason: &str| MetricsError {
        line,
        reason: reason.into(),
    };
    let mut labels = Vec::new();
    let mut rest = text.trim_start_matches([',', ' ']);
    while !rest.is_empty() {
        let (name, after) = rest
            .split_once('=')
            .ok_or_else(|| error("a label without '='"))?;
        let after = after
            .strip_prefix('"')
            .ok_or_else(|| error("a label value must be quoted"))?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => return Err(error("a label value ends in a backslash")),
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                other => value.push(other),
            }
        }
        let end = end.ok_or_else(|| error("a label value is not closed"))?;
        labels.push((name.trim(), value));
        rest = after[end + 1..].trim_start_matches([',', ' ']);
    }
    Ok(labels)
}

fn parse_sample(text: &str, line: usize) -> Result<Sample<'_>, MetricsError> {
    let error = |reason: String| MetricsError { line, reason };
    let (name, labels, rest) = match text.find('{') {
        Some(open) => {
            let close = text
                .rfind('}')
                .filter(|close| *close > open)
                .ok_or_else(|| error("a '{' without its '}'".into()))?;
            (
                &text[..open],
                parse_labels(&text[open + 1..close], line)?,
                &text[close + 1..],
            )
        }
        None => {
            let (name, rest) = text
                .split_once(char::is_whitespace)
                .ok_or_else(|| error("a sample without a value".into()))?;
            (name, Vec::new(), rest)
        }
    };
    let value_text = rest
        .split_whitespace()
        .next()
        .ok_or_else(|| error(format!("{name}: a sample without a value")))?;
    let value = value_text
        .parse::<f64>()
        .map_err(|_| error(format!("{name}: {value_text:?} is not a number")))?;
    Ok(Sample {
        name: name.trim(),
        labels,
        value,
    })
}

fn adapters(list: &str) -> BTreeSet<String> {
    list.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect()
}

impl EndpointMetrics {
    /// Reads a Prometheus text exposition. Series the picker does not consume are skipped;
    /// among several `vllm:lora_requests_info` series the one with the highest value (vLLM
    /// writes a timestamp there) wins, as the picker's extractor chooses.
    pub fn parse(text: &str) -> Result<EndpointMetrics, MetricsError> {
        let mut metrics = EndpointMetrics::default();
        let mut newest_lora = f64::NEG_INFINITY;
        let mut saw_new_kv = false;
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let sample = parse_sample(line, index + 1)?;
            let count = |value: f64| {
                if value.is_finite() && value >= 0.0 {
                    Ok(value.min(f64::from(u32::MAX)) as u32)
                } else {
                    Err(MetricsError {
                        line: index + 1,
                        reason: format!("{}: {value} is not a count", sample.name),
                    })
                }
            };
            match sample.name {
                WAITING => metrics.waiting = count(sample.value)?,
                RUNNING => metrics.running = count(sample.value)?,
                KV_USAGE => {
                    metrics.kv_cache_usage = sample.value.clamp(0.0, 1.0);
                    saw_new_kv = true;
                }
                KV_USAGE_OLD if !saw_new_kv => {
                    metrics.kv_cache_usage = sample.value.clamp(0.0, 1.0);
                }
                LORA_INFO if sample.value >= newest_lora => {
                    newest_lora = sample.value;
                    for (label, value) in &sample.labels {
                        match *label {
                            "running_lora_adapters" => metrics.active_adapters = adapters(value),
                            "waiting_lora_adapters" => metrics.waiting_adapters = adapters(value),
                            "max_lora" => {
                                metrics.max_adapters = value.parse().map_err(|_| MetricsError {
                                    line: index + 1,
                                    reason: format!("max_lora {value:?} is not a count"),
                                })?
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(metrics)
    }

    /// Writes the exposition a vLLM server of `model` serves at `/metrics` (the consumed
    /// series only); `timestamp` is the lora series' value.
    pub fn render(&self, model: &str, timestamp: f64) -> String {
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
        format!(
            "# HELP {WAITING} Number of requests waiting to be processed.\n\
             # TYPE {WAITING} gauge\n\
             {WAITING}{{model_name=\"{model}\"}} {}\n\
             # HELP {RUNNING} Number of requests in model execution batches.\n\
             # TYPE {RUNNING} gauge\n\
             {RUNNING}{{model_name=\"{model}\"}} {}\n\
             # HELP {KV_USAGE} KV-cache usage. 1 means 100 percent usage.\n\
             # TYPE {KV_USAGE} gauge\n\
             {KV_USAGE}{{model_name=\"{model}\"}} {}\n\
             # HELP {LORA_INFO} Running stats on lora requests.\n\
             # TYPE {LORA_INFO} gauge\n\
             {LORA_INFO}{{max_lora=\"{}\",running_lora_adapters=\"{}\",waiting_lora_adapters=\"{}\"}} {timestamp}\n",
            self.waiting,
            self.running,
            self.kv_cache_usage,
            self.max_adapters,
            join(&self.active_adapters),
            join(&self.waiting_adapters),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_vllms_exposition_and_keeps_the_newest_lora_series() {
        let text = r#"
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
vllm:num_requests_waiting{model_name="llama"} 7.0
vllm:num_requests_running{model_name="llama"} 12
vllm:gpu_cache_usage_perc{model_name="llama"} 0.25
vllm:kv_cache_usage_perc{model_name="llama"} 0.5
vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql,chat",waiting_lora_adapters=""} 1.7e9
vllm:lora_requests_info{max_lora="4",running_lora_adapters="old",waiting_lora_adapters="x"} 1.6e9
vllm:prompt_tokens_total{model_name="llama"} 1234
"#;
        let metrics = EndpointMetrics::parse(text).expect("parses");
        assert_eq!(metrics.waiting, 7);
        assert_eq!(metrics.running, 12);
        assert_eq!(
            metrics.kv_cache_usage, 0.5,
            "the new name wins over the old"
        );
        assert_eq!(
            metrics.active_adapters.iter().collect::<Vec<_>>(),
            ["chat", "sql"]
        );
        assert!(metrics.waiting_adapters.is_empty());
        assert_eq!(metrics.max_adapters, 4);
    }

    #[test]
    fn what_it_writes_it_reads_back() {
        let metrics = EndpointMetrics {
            waiting: 3,
            running: 9,
            kv_cache_usage: 0.75,
            active_adapters: ["a".to_string(), "b".to_string()].into(),
            waiting_adapters: ["c".to_string()].into(),
            max_adapters: 4,
        };
        let text = metrics.render("llama", 12.0);
        assert_eq!(EndpointMetrics::parse(&text), Ok(metrics));
    }

    #[test]
    fn bad_lines_are_named() {
        let cases = [
            (
                "vllm:num_requests_waiting{model_name=\"x\"} many",
                1,
                "is not a number",
            ),
            ("\nvllm:num_requests_running -3", 2, "is not a count"),
            (
                "vllm:num_requests_waiting{model_name=x} 1",
                1,
                "must be quoted",
            ),
            (
                "vllm:num_requests_waiting{model_name=\"x\" 1",
                1,
                "without its '}'",
            ),
            ("vllm:num_requests_waiting", 1, "without a value"),
            (
                "vllm:lora_requests_info{max_lora=\"four\"} 1",
                1,
                "max_lora \"four\"",
            ),
        ];
        for (text, line, reason) in cases {
            let error = EndpointMetrics::parse(text).expect_err(text);
            assert_eq!(error.line, line, "{text}");
            assert!(error.reason.contains(reason), "{text}: {error}");
        }
    }

    proptest! {
        #[test]
        fn no_input_panics(text in "\\PC{0,200}") {
            let _ = EndpointMetrics::parse(&text);
        }

        #[test]
        fn label_soup_never_panics(text in "[a-z_:{}=\",\\\\ 0-9.]{0,80}") {
            let _ = EndpointMetrics::parse(&text);
        }
    }
}
