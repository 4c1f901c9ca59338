//! The openb engine on the timeline: trace pods (milli-GPU shares, GPU models) placed by one
//! of the FGD artifact's policies or Tessera's, as `tessera sim run` does for openb traces.
//! Knows the trace's columns and the engine; the timeline knows neither.

use crate::cluster::{Demand, MILLI, Node};
use crate::engine::{Engine, Placement};
use crate::frag::TypicalPod;
use crate::policy::Policy;
use crate::timeline::{Placed, Placer, TimedPod, TimelineError};
use crate::trace::TracePod;

/// An openb cluster under a policy.
pub struct TracePlacer<'t> {
    engine: Engine<'t>,
    capacity: i64,
}

impl<'t> TracePlacer<'t> {
    /// `nodes` under `policy`; `typical` is the workload's typical pods (fragmentation).
    pub fn new(nodes: Vec<Node>, policy: Policy, typical: &'t [TypicalPod], seed: u64) -> Self {
        let capacity = nodes.iter().map(|n| n.gpus.len() as i64).sum::<i64>() * MILLI;
        TracePlacer {
            engine: Engine::new(nodes, policy, typical, seed),
            capacity,
        }
    }
}

impl Placer for TracePlacer<'_> {
    type Work = Demand;
    type Held = (usize, Vec<usize>);
    type Shape = Demand;

    fn shape(&self, work: &Demand) -> Option<Demand> {
        Some(work.clone())
    }

    fn place(&mut self, _: (&str, &str), work: &Demand) -> Option<(Placed, Self::Held)> {
        match self.engine.schedule(work) {
            Placement::Placed { node, gpus } => {
                let placed = Placed {
                    node: self.engine.nodes()[node].name.clone(),
                    devices: gpus.iter().map(usize::to_string).collect(),
                    gpu_milli: work.total_milli(),
                };
                Some((placed, (node, gpus)))
            }
            Placement::Unschedulable => None,
        }
    }

    fn release(&mut self, _: (&str, &str), work: &Demand, (node, gpus): Self::Held) {
        self.engine.release(node, work, &gpus);
    }

    fn gpu_used(&self) -> i64 {
        self.engine.used()
    }

    fn gpu_capacity(&self) -> i64 {
        self.capacity
    }

    fn fragmentation(&self) -> Option<f64> {
        Some(self.engine.fragmentation())
    }

    fn nodes(&self) -> usize {
        self.engine.nodes().len()
    }
}

/// The pods of an openb trace on the timeline: arrival at `creation_time`, running until
/// `deletion_time` (to the end when it has none), all in namespace `namespace`.
pub fn from_trace(
    pods: &[TracePod],
    namespace: &str,
) -> Result<Vec<TimedPod<Demand>>, TimelineError> {
    pods.iter()
        .map(|pod| {
            let arrival = pod.creation_time.ok_or_else(|| TimelineError {
                pod: pod.name.clone(),
                message: "creation_time is empty: the trace has no arrival times".into(),
            })?;
            let duration = match pod.deletion_time {
                Some(end) if end < arrival => {
                    return Err(TimelineError {
                        pod: pod.name.clone(),
                        message: format!("deletion_time {end} is before creation_time {arrival}"),
                    });
                }
                end => end.map(|end| end - arrival),
            };
            Ok(TimedPod {
                namespace: namespace.to_string(),
                name: pod.name.clone(),
                arrival,
                follows: None,
                duration,
                priority: 0,
                work: Demand::of_trace(pod),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{self, Event, EventKind, Options, Summary};

    fn timed(
        name: &str,
        namespace: &str,
        arrival: i64,
        duration: Option<i64>,
        gpus: u32,
        milli: i64,
    ) -> TimedPod<Demand> {
        TimedPod {
            namespace: namespace.into(),
            name: name.into(),
            arrival,
            follows: None,
            duration,
            priority: 0,
            work: Demand {
                cpu: 1000,
                memory: 1,
                gpus,
                milli,
                models: String::new(),
            },
        }
    }

    fn options(max_wait: Option<i64>) -> Options {
        Options {
            policy: "bestfit".into(),
            seed: 1,
            max_wait,
        }
    }

    fn run(
        nodes: Vec<Node>,
        pods: Vec<TimedPod<Demand>>,
        options: &Options,
    ) -> (Vec<Event>, Summary) {
        let mut placer = TracePlacer::new(nodes, Policy::BestFit, &[], 1);
        timeline::run(&mut placer, pods, options).expect("runs")
    }

    #[test]
    fn pods_wait_for_room_and_leave_on_time() {
        // One node, one GPU: a takes it 0–100; b waits until 100 and runs to 150; c waits too
        // long and is given up at 60.
        let nodes = vec![Node::new("n", 8000, 1 << 20, 1, "T4")];
        let pods = vec![
            timed("a", "team-a", 0, Some(100), 1, 1000),
            timed("b", "team-b", 10, Some(50), 1, 1000),
            timed("c", "team-b", 20, Some(10), 1, 1000),
        ];
        let (events, summary) = run(nodes.clone(), pods.clone(), &options(Some(40)));
        let got: Vec<(i64, &str, &str)> = events
            .iter()
            .map(|e| {
                let kind = match &e.kind {
                    EventKind::Arrived => "arrived",
                    EventKind::Placed { .. } => "placed",
                    EventKind::Pending => "pending",
                    EventKind::Departed => "departed",
                    EventKind::Failed => "failed",
                    EventKind::Preempted { .. } => "preempted",
                };
                (e.time, e.pod.as_str(), kind)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (0, "a", "arrived"),
                (0, "a", "placed"),
                (10, "b", "arrived"),
                (10, "b", "pending"),
                (20, "c", "arrived"),
                (20, "c", "pending"),
                (50, "b", "failed"),
                (60, "c", "failed"),
                (100, "a", "departed"),
            ]
        );
        // Without a maximum wait b runs after a, then c after b.
        let (events, summary_unlimited) = run(nodes, pods, &options(None));
        assert_eq!(
            events.last().map(|e| (e.time, e.pod.as_str())),
            Some((160, "c"))
        );
        assert_eq!(summary_unlimited.makespan, 160);
        assert_eq!(summary_unlimited.overall.completed, 3);
        // b waited 90, c 130: mean 73.3 over a, b, c.
        assert!((summary_unlimited.overall.mean_wait - 220.0 / 3.0).abs() < 1e-9);
        assert_eq!(summary_unlimited.namespaces["team-b"].pods, 2);
        assert_eq!(summary.overall.failed, 2);
        assert_eq!(summary.namespaces["team-b"].failed, 2);
        // The GPU was busy 100 of the 100 seconds until the last event.
        assert!(
            (summary.mean_allocation - 100.0).abs() < 1e-9,
            "{}",
            summary.mean_allocation
        );
        let json = serde_json::to_string(&events[1]).expect("json");
        assert!(
            json.contains("\"event\":\"placed\"")
                && json.contains("\"waited\":0")
                && json.contains("\"devices\":[\"0\"]"),
            "{json}"
        );
    }
}
