//! The FGD experiment as the artifact runs it (`pkg/simulator/core.go: Simulate`, see
//! `docs/sim.md`): the trace's pods sorted by name give the typical pods; a seeded generator
//! shuffles them, tunes the workload up to `tune` × the cluster's GPU capacity with random
//! copies appended after the shuffled originals, and gives every node a random priority prefix
//! (`0042-<name>`, which decides ties); then the pods arrive one by one, each counted as arrived
//! before it is placed, an unplaceable pod dropped; nothing departs. After every pod the
//! allocated and arrived GPU thousandths are recorded, and [`discrete_row`] bins them as the
//! artifact's `analysis_allo_discrete.csv` does.
//!
//! Pure and deterministic for a seed. The generator is `fastrand`'s, not Go's `math/rand`, so
//! runs match the artifact's in distribution across seeds, not seed by seed.

use crate::cluster::{Demand, MILLI, Node};
use crate::engine::{Engine, Placement};
use crate::frag::typical_pods;
use crate::policy::Policy;
use crate::trace::{TraceNode, TracePod};

/// The highest arrived percentage the discrete table has a column for.
pub const LAST_COLUMN: usize = 130;

/// An experiment that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExperimentError {
    /// No node has a GPU.
    #[error("the cluster has no GPUs: nothing to allocate")]
    NoGpus,
    /// No pods.
    #[error("the workload has no pods")]
    NoPods,
    /// A tuning factor below 1 or absurd.
    #[error("tune must be between 1 and 10, is {0}")]
    Tune(String),
}

/// One recorded event: after a pod's attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// GPU thousandths of the pods arrived so far (placed or not).
    pub arrived: i64,
    /// GPU thousandths allocated.
    pub used: i64,
}

/// What one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// GPUs in the cluster.
    pub total_gpus: i64,
    /// Pods that arrived (originals and tuned copies).
    pub arrived_pods: usize,
    /// Pods placed.
    pub placed: usize,
    /// Pods that fit nowhere.
    pub failed: usize,
    /// One event per pod.
    pub events: Vec<Event>,
    /// The cluster's fragmentation at the end (GPU thousandths).
    pub fragmentation: f64,
    /// The pods that fit nowhere, with the index of their event.
    pub unschedulable: Vec<(usize, Demand)>,
}

impl Outcome {
    /// GPU allocation in percent of capacity when the arrived workload first reaches
    /// `percent` of capacity (the last event before it, if it never does).
    pub fn allocation_at(&self, percent: f64) -> f64 {
        let capacity = (self.total_gpus * MILLI) as f64;
        let event = self
            .events
            .iter()
            .find(|e| e.arrived as f64 >= capacity * percent / 100.0)
            .or(self.events.last());
        event.map_or(0.0, |e| 100.0 * e.used as f64 / capacity)
    }
}

/// Runs one experiment: `pods` of a trace over `nodes` under `policy`.
pub fn run(
    nodes: &[TraceNode],
    pods: &[TracePod],
    policy: Policy,
    seed: u64,
    tune: f64,
) -> Result<Outcome, ExperimentError> {
    if !(1.0..=10.0).contains(&tune) {
        return Err(ExperimentError::Tune(tune.to_string()));
    }
    let total_gpus: i64 = nodes.iter().map(|n| i64::from(n.gpus)).sum();
    if total_gpus == 0 {
        return Err(ExperimentError::NoGpus);
    }
    if pods.is_empty() {
        return Err(ExperimentError::NoPods);
    }
    let mut originals: Vec<&TracePod> = pods.iter().collect();
    originals.sort_by(|a, b| a.name.cmp(&b.name));
    let demands: Vec<Demand> = originals.iter().map(|p| Demand::of_trace(p)).collect();
    let typical = typical_pods(&demands);

    let mut rng = fastrand::Rng::with_seed(seed);
    // The arrival order: the originals shuffled, then the tuned copies.
    let mut order: Vec<Demand> = demands.clone();
    rng.shuffle(&mut order);
    let capacity = total_gpus * MILLI;
    let limit = tune * capacity as f64;
    let mut total: i64 = demands.iter().map(Demand::total_milli).sum();
    loop {
        let copy = &demands[rng.usize(..demands.len())];
        // The artifact's check adds one GPU's share, its total adds every GPU's.
        if (total + copy.milli) as f64 > limit {
            break;
        }
        total += copy.total_milli();
        order.push(copy.clone());
        if order.len() > 100 * demands.len() + 1_000_000 {
            // Only CPU pods can be drawn forever; the artifact would loop, we stop.
            break;
        }
    }
    // Node priorities: a random permutation as a name prefix; ties go to the lowest.
    let mut sorted: Vec<&TraceNode> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut prefix: Vec<usize> = (0..sorted.len()).collect();
    rng.shuffle(&mut prefix);
    let cluster: Vec<Node> = sorted
        .iter()
        .zip(&prefix)
        .map(|(n, p)| Node::of_trace(n, &format!("{p:04}-{}", n.name)))
        .collect();

    let mut engine = Engine::new(cluster, policy, &typical, rng.u64(..));
    let mut events = Vec::with_capacity(order.len());
    let (mut arrived, mut placed, mut failed) = (0, 0, 0);
    let mut unschedulable = Vec::new();
    for pod in &order {
        arrived += pod.total_milli();
        match engine.schedule(pod) {
            Placement::Placed { .. } => placed += 1,
            Placement::Unschedulable => {
                failed += 1;
                unschedulable.push((events.len(), pod.clone()));
            }
        }
        events.push(Event {
            arrived,
            used: engine.used(),
        });
    }
    Ok(Outcome {
        total_gpus,
        arrived_pods: order.len(),
        placed,
        failed,
        events,
        fragmentation: engine.fragmentation(),
        unschedulable,
    })
}

/// The header of `analysis_allo_discrete.csv`.
pub fn discrete_header() -> String {
    let columns: Vec<String> = (0..=LAST_COLUMN).map(|c| c.to_string()).collect();
    format!(
        "workload,sc_policy,tune,seed,total_gpus,{}",
        columns.join(",")
    )
}

/// Python's `round(x, 2)` printed as pandas prints a float.
fn cell(value: f64) -> String {
    let rounded = (value * 100.0).round_ties_even() / 100.0;
    let text = format!("{rounded}");
    if text.contains('.') || text.contains('e') {
        text
    } else {
        format!("{text}.0")
    }
}

/// The allocation column of `analysis_allo_discrete.csv`: for each arrived percentage 0–130,
/// the mean allocation of the events whose arrived share rounds to it (else within one point of
/// it; else none), each allocation first rounded to two decimals, the mean rounded again.
pub fn discrete(outcome: &Outcome) -> Vec<Option<f64>> {
    let gpus = outcome.total_gpus as f64;
    let round2 = |v: f64| (v * 100.0).round_ties_even() / 100.0;
    let binned: Vec<(i64, f64)> = outcome
        .events
        .iter()
        .map(|e| {
            let arrive = (e.arrived as f64 / gpus / 10.0).round_ties_even() as i64;
            (arrive, round2(e.used as f64 / gpus / 10.0))
        })
        .collect();
    (0..=LAST_COLUMN as i64)
        .map(|column| {
            let mean = |within: i64| -> Option<f64> {
                let values: Vec<f64> = binned
                    .iter()
                    .filter(|(a, _)| (a - column).abs() <= within)
                    .map(|(_, v)| *v)
                    .collect();
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
            };
            mean(0).or_else(|| mean(1)).map(round2)
        })
        .collect()
}

/// One row of `analysis_allo_discrete.csv` ([`discrete_header`]'s columns).
pub fn discrete_row(
    workload: &str,
    policy: Policy,
    tune: f64,
    seed: u64,
    outcome: &Outcome,
) -> String {
    let cells: Vec<String> = discrete(outcome)
        .into_iter()
        .map(|c| c.map(cell).unwrap_or_default())
        .collect();
    format!(
        "{workload},{},{tune},{seed},{},{}",
        policy.label(),
        outcome.total_gpus,
        cells.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace_node(name: &str, gpus: u32) -> TraceNode {
        TraceNode {
            name: name.into(),
            cpu_milli: 64_000,
            memory_mib: 262_144,
            gpus,
            model: "T4".into(),
        }
    }

    fn trace_pod(name: &str, num_gpu: u32, gpu_milli: i64) -> TracePod {
        TracePod {
            name: name.into(),
            cpu_milli: 4000,
            memory_mib: 1024,
            num_gpu,
            gpu_milli,
            gpu_spec: String::new(),
            creation_time: None,
            deletion_time: None,
        }
    }

    #[test]
    fn tuning_fills_to_the_limit_and_events_count_every_arrival() {
        let nodes: Vec<TraceNode> = (0..4).map(|i| trace_node(&format!("n{i}"), 2)).collect();
        let pods = vec![
            trace_pod("a", 1, 500),
            trace_pod("b", 1, 1000),
            trace_pod("c", 0, 0),
        ];
        let outcome = run(&nodes, &pods, Policy::Fgd, 42, 1.3).expect("runs");
        assert_eq!(outcome.total_gpus, 8);
        assert_eq!(outcome.events.len(), outcome.arrived_pods);
        assert_eq!(outcome.placed + outcome.failed, outcome.arrived_pods);
        let last = outcome.events.last().expect("events");
        // Arrived stays within 130% of 8,000 plus at most one GPU of overshoot.
        assert!(last.arrived <= 10_400 + 1000, "{last:?}");
        assert!(last.used <= 8000);
        // Deterministic for a seed.
        assert_eq!(
            run(&nodes, &pods, Policy::Fgd, 42, 1.3),
            Ok(outcome.clone())
        );
        let row = discrete_row("toy", Policy::Fgd, 1.3, 42, &outcome);
        assert!(row.starts_with("toy,06-FGD,1.3,42,8,"), "{row}");
        assert_eq!(row.split(',').count(), 5 + 131);
        assert_eq!(discrete_header().split(',').count(), 5 + 131);
    }

    #[test]
    fn bad_experiments_are_refused() {
        let pods = vec![trace_pod("a", 1, 500)];
        assert_eq!(
            run(&[trace_node("n", 0)], &pods, Policy::Fgd, 1, 1.3),
            Err(ExperimentError::NoGpus)
        );
        assert_eq!(
            run(&[trace_node("n", 1)], &[], Policy::Fgd, 1, 1.3),
            Err(ExperimentError::NoPods)
        );
        assert!(run(&[trace_node("n", 1)], &pods, Policy::Fgd, 1, 0.5).is_err());
        assert_eq!(cell(95.234), "95.23");
        assert_eq!(cell(0.0), "0.0");
        assert_eq!(cell(12.5), "12.5");
    }
}
