//! Metrics as the real components name them, as a pure core.
//!
//! - [`components`]: the definitions (name, help, label names, buckets) of the metrics the
//!   in-process components keep — kube-apiserver's `apiserver_*`, kube-scheduler's
//!   `scheduler_*`, Kueue's `kueue_*` counters — and [`components::Registries`], the one set
//!   of registries `tessera up` shares between its shells; plus the request labels upstream
//!   derives from a request (`LIST` vs `GET`, `WATCH`, `APPLY`, scope, dry run).
//! - [`controllers`]: kube-controller-manager's — client-go's `workqueue_*` as Tessera's
//!   pass-running controllers map onto them, `job_controller_jobs_finished_total` and the node
//!   lifecycle controller's `node_collector_*` — and what a Job status or a node set means
//!   for them.
//! - [`ksm`]: kube-state-metrics as a function of stored objects.
//! - [`kueue`]: Kueue's gauges that are a function of its stored objects.
//! - [`prometheus_config`]: the `prometheus.yml` and alerting rules for a Tessera platform.
//!
//! Everything is computed from values handed in; nothing here reads a socket, a file or the
//! clock. Metrics computed at scrape time are built into a fresh [`prometheus::Registry`] by
//! [`Families`]; [`render`] writes any set of registries in the text format 0.0.4.

pub mod components;
pub mod controllers;
pub mod ksm;
pub mod kueue;
pub mod prometheus_config;

use std::collections::BTreeMap;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{CounterVec, GaugeVec, Opts, Registry, TextEncoder};

/// The content type of the text exposition format this crate renders.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric could not be defined or registered (a programming error: names and label
/// counts are fixed here, never taken from input).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The prometheus library refused a definition or a sample.
    #[error("metric {name}: {source}")]
    Metric {
        /// The family's name.
        name: String,
        /// What the library said.
        source: prometheus::Error,
    },
    /// The text encoder failed.
    #[error("encode metrics: {0}")]
    Encode(prometheus::Error),
}

/// The definition of one family: upstream's name, help and label names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Family {
    /// The metric's name.
    pub name: &'static str,
    /// Its help text.
    pub help: &'static str,
    /// Its label names, in order.
    pub labels: &'static [&'static str],
}

/// A family's definition (a `const` constructor for the tables of definitions).
pub const fn family(
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
) -> Family {
    Family { name, help, labels }
}

/// Renders the families of several registries as one text-format page (families sorted by
/// name within each registry, registries in the order given).
pub fn render(registries: &[&Registry]) -> Result<String, Error> {
    let families: Vec<MetricFamily> = registries.iter().flat_map(|r| r.gather()).collect();
    TextEncoder::new()
        .encode_to_string(&families)
        .map_err(Error::Encode)
}

/// Families computed at scrape time, built into a fresh registry: each sample names its
/// family's definition, the family is created on first use.
#[derive(Default)]
pub struct Families {
    registry: Registry,
    gauges: BTreeMap<&'static str, GaugeVec>,
    counters: BTreeMap<&'static str, CounterVec>,
    error: Option<Error>,
}

impl Families {
    /// An empty set.
    pub fn new() -> Families {
        Families::default()
    }

    fn fail(&mut self, name: &str, source: prometheus::Error) {
        if self.error.is_none() {
            self.error = Some(Error::Metric {
                name: name.to_string(),
                source,
            });
        }
    }

    fn register<C: Collector + Clone + 'static>(&mut self, family: &Family, collector: &C) {
        if let Err(source) = self.registry.register(Box::new(collector.clone())) {
            self.fail(family.name, source);
        }
    }

    /// Declares a gauge family with no samples yet (so that it is present, if empty, when
    /// no object feeds it).
    fn gauge_vec(&mut self, family: &Family) -> Option<GaugeVec> {
        if let Some(vec) = self.gauges.get(family.name) {
            return Some(vec.clone());
        }
        match GaugeVec::new(Opts::new(family.name, family.help), family.labels) {
            Ok(vec) => {
                self.register(family, &vec);
                self.gauges.insert(family.name, vec.clone());
                Some(vec)
            }
            Err(source) => {
                self.fail(family.name, source);
                None
            }
        }
    }

    /// Sets one gauge sample; `values` in the order of the family's labels.
    pub fn gauge(&mut self, family: &Family, values: &[&str], value: f64) {
        let Some(vec) = self.gauge_vec(family) else {
            return;
        };
        match vec.get_metric_with_label_values(values) {
            Ok(gauge) => gauge.set(value),
            Err(source) => self.fail(family.name, source),
        }
    }

    /// Sets one counter sample (a counter's current total read from an object).
    pub fn counter(&mut self, family: &Family, values: &[&str], value: f64) {
        let vec = match self.counters.get(family.name) {
            Some(vec) => vec.clone(),
            None => match CounterVec::new(Opts::new(family.name, family.help), family.labels) {
                Ok(vec) => {
                    self.register(family, &vec);
                    self.counters.insert(family.name, vec.clone());
                    vec
                }
                Err(source) => return self.fail(family.name, source),
            },
        };
        match vec.get_metric_with_label_values(values) {
            Ok(counter) => counter.inc_by(value.max(0.0)),
            Err(source) => self.fail(family.name, source),
        }
    }

    /// Sets one sample per status of a one-hot family (1 for `current`, 0 for the others);
    /// `values` are the labels before the status label.
    pub fn one_hot(&mut self, family: &Family, values: &[&str], statuses: &[&str], current: &str) {
        for status in statuses {
            let mut labels = values.to_vec();
            labels.push(status);
            self.gauge(family, &labels, f64::from(u8::from(*status == current)));
        }
    }

    /// The registry with every family, or the first definition error.
    pub fn finish(self) -> Result<Registry, Error> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.registry),
        }
    }
}

/// A quantity's value as a float: `milli / 1000` for CPU-like resources, bytes or units
/// otherwise (`None` when it does not parse).
pub(crate) fn quantity(text: &str) -> Option<f64> {
    let quantity: tessera_model::quantity::Quantity = text.parse().ok()?;
    // Exact to the nanounit; a float is what the exposition format carries.
    #[allow(clippy::cast_precision_loss)]
    Some(quantity.nanos() as f64 / 1e9)
}

/// Reads a quantity that may be a JSON string or number.
pub(crate) fn quantity_value(value: &serde_json::Value) -> Option<f64> {
    match value {
        serde_json::Value::String(text) => quantity(text),
        serde_json::Value::Number(number) => number.as_f64(),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod testing;
