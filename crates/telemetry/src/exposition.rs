//! Building Prometheus metric families and encoding them with the `prometheus` crate's
//! text encoder: the renderers compute their samples at scrape time, so they fill fresh
//! families rather than keep a registry of live collectors.

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};

/// Whether a family is a gauge or a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Gauge,
    Counter,
}

/// An empty family.
pub(crate) fn family(name: &str, help: &str, kind: Kind) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(match kind {
        Kind::Gauge => MetricType::GAUGE,
        Kind::Counter => MetricType::COUNTER,
    });
    family
}

/// Label pairs, in this order.
pub(crate) fn label_pairs(labels: &[(&str, &str)]) -> Vec<LabelPair> {
    labels
        .iter()
        .map(|(name, value)| {
            let mut pair = LabelPair::default();
            pair.set_name((*name).to_string());
            pair.set_value((*value).to_string());
            pair
        })
        .collect()
}

/// Adds a sample with `labels` (in this order) to `family`.
pub(crate) fn push(
    family: &mut MetricFamily,
    labels: &[(&str, &str)],
    value: f64,
    timestamp_ms: Option<i64>,
) {
    push_pairs(family, label_pairs(labels), value, timestamp_ms);
}

/// Adds a sample with label pairs `pairs` to `family`.
pub(crate) fn push_pairs(
    family: &mut MetricFamily,
    pairs: Vec<LabelPair>,
    value: f64,
    timestamp_ms: Option<i64>,
) {
    let mut metric = Metric::from_label(pairs);
    if family.get_field_type() == MetricType::COUNTER {
        let mut counter = Counter::default();
        counter.set_value(value);
        metric.set_counter(counter);
    } else {
        let mut gauge = Gauge::default();
        gauge.set_value(value);
        metric.set_gauge(gauge);
    }
    if let Some(ms) = timestamp_ms {
        metric.set_timestamp_ms(ms);
    }
    family.mut_metric().push(metric);
}

/// The text format (0.0.4) of the families that have samples.
pub(crate) fn encode(mut families: Vec<MetricFamily>) -> String {
    families.retain(|f| !f.get_metric().is_empty());
    let mut buffer = Vec::new();
    // The families are well formed by construction: names are constants, every one has
    // samples, so the encoder has nothing to refuse.
    if TextEncoder::new().encode(&families, &mut buffer).is_err() {
        return String::new();
    }
    String::from_utf8(buffer).unwrap_or_default()
}
