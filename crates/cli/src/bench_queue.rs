//! `tessera bench queue`: Kueue's scheduler-performance configurations (`test/performance/
//! scheduler/configs`: baseline, large-scale) replayed through tessera-queue's admission cycle
//! on the simulator's virtual clock (`tessera_sim::queue_timeline`), against Kueue's calibrated
//! averages (the `rangespec.yaml` comments). Rows for [`crate::bench_report`]; the simulation
//! and its measurements are the core's.

use std::time::Instant;

use clap::ValueEnum;
use tessera_sim::queue_scenario::{self, GeneratorConfig};
use tessera_sim::queue_timeline::{self, Options, Outcome};

use crate::bench_report::{CpuClock, Figure, Repeat, Row};

/// What the rows measure.
const KIND: &str = "simulator, virtual time";

/// Kueue's configurations.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueConfig {
    /// 5 Cohorts × 6 ClusterQueues, 15,000 Workloads.
    Baseline,
    /// 10 Cohorts × 100 ClusterQueues, 50,000 Workloads.
    LargeScale,
}

/// Kueue's calibrated averages for a configuration (its `rangespec.yaml`).
struct Calibration {
    wall_ms: f64,
    usage_percent: f64,
    /// (class, average time to admission ms)
    admission_ms: &'static [(&'static str, f64)],
}

impl QueueConfig {
    fn name(self) -> &'static str {
        match self {
            QueueConfig::Baseline => "baseline",
            QueueConfig::LargeScale => "large-scale",
        }
    }

    fn generator(self) -> &'static str {
        match self {
            QueueConfig::Baseline => queue_scenario::BASELINE,
            QueueConfig::LargeScale => queue_scenario::LARGE_SCALE,
        }
    }

    fn calibration(self) -> Calibration {
        match self {
            QueueConfig::Baseline => Calibration {
                wall_ms: 351_116.4,
                usage_percent: 55.9,
                admission_ms: &[
                    ("large", 16_501.0),
                    ("medium", 76_768.0),
                    ("small", 215_468.0),
                ],
            },
            QueueConfig::LargeScale => Calibration {
                wall_ms: 1_179_411.0,
                usage_percent: 38.64,
                admission_ms: &[
                    ("large", 105_604.0),
                    ("medium", 256_413.0),
                    ("small", 700_379.0),
                ],
            },
        }
    }
}

/// A fraction in (0, 1].
fn parse_fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|e| format!("{text:?}: {e}"))?;
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(format!("{text}: a fraction above 0 and at most 1"))
    }
}

/// Options of `tessera bench queue`.
#[derive(clap::Args, Debug, Clone)]
pub struct QueueBenchArgs {
    /// Kueue's configuration to replay.
    #[arg(long, value_enum, default_value = "baseline")]
    pub config: QueueConfig,
    /// Runs every workload set with this fraction of its Workloads (same ClusterQueues,
    /// classes and intervals): a smaller run of the same shape.
    #[arg(long, default_value_t = 1.0, value_parser = parse_fraction)]
    pub scale: f64,
    /// Draws the Workloads' UIDs, which order Workloads created in the same second.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    #[command(flatten)]
    pub repeat: Repeat,
}

/// The anchor text: Kueue's calibrated averages.
fn anchor(calibration: &Calibration) -> String {
    let admission: Vec<String> = calibration
        .admission_ms
        .iter()
        .map(|(class, ms)| format!("{class} {:.1} s", ms / 1000.0))
        .collect();
    format!(
        "Kueue (minimalkueue on envtest, rangespec.yaml averages): wall {:.0} s, usage {}%, avg time to admission {}",
        calibration.wall_ms / 1000.0,
        calibration.usage_percent,
        admission.join(" / ")
    )
}

fn figures(
    outcome: &Outcome,
    calibration: &Calibration,
    cpu: Option<f64>,
    real: f64,
) -> Vec<Figure> {
    let mut figures = vec![Figure::new(
        "virtual wall time",
        "s",
        outcome.wall_ms as f64 / 1000.0,
    )];
    for class in &outcome.cluster_queue_classes {
        figures.push(Figure::new(
            &format!("ClusterQueue usage ({})", class.class),
            "%",
            class.usage_percent,
        ));
    }
    // Kueue's classes first, in its order, then any other.
    let mut classes: Vec<_> = outcome.workload_classes.iter().collect();
    classes.sort_by_key(|c| {
        calibration
            .admission_ms
            .iter()
            .position(|(name, _)| *name == c.class)
            .unwrap_or(usize::MAX)
    });
    for class in classes {
        figures.push(Figure::new(
            &format!("avg time to admission {}", class.class),
            "s",
            class.average_time_to_admission_ms / 1000.0,
        ));
    }
    figures.extend([
        Figure::new("evictions", "", outcome.evictions as f64),
        Figure::new("unfinished", "", outcome.unfinished as f64),
        Figure::new("cycles", "", outcome.cycles as f64),
        Figure::new("CPU", "s", cpu),
        Figure::new("wall clock", "s", real),
    ]);
    figures
}

/// One run of `tessera bench queue`.
pub fn queue(args: &QueueBenchArgs) -> anyhow::Result<Vec<Row>> {
    let config = args.config;
    let cpu = CpuClock::start();
    let started = Instant::now();
    let generator = GeneratorConfig::parse(config.generator())?.scaled(args.scale);
    let plan = generator.plan();
    let outcome = queue_timeline::run(
        &plan,
        Options {
            seed: args.seed,
            equivalence_hashing: true,
        },
    )?;
    let real = started.elapsed().as_secs_f64();
    let cpu_seconds = cpu.seconds();
    let calibration = config.calibration();
    Ok(vec![Row {
        name: format!(
            "Kueue scheduler performance, {} ({} ClusterQueues, {} Workloads)",
            config.name(),
            plan.cluster_queues.len(),
            plan.workloads.len()
        ),
        kind: KIND.into(),
        items: plan.workloads.len() as u64,
        cpu_seconds,
        figures: figures(&outcome, &calibration, cpu_seconds, real),
        anchor: anchor(&calibration),
    }])
}
