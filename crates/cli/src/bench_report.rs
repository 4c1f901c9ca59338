//! What every `tessera bench` command reports, and how runs are repeated: a benchmark yields
//! rows (a name, what kind of measurement it is, how many items it counted, the process CPU
//! time it used and its figures); `--runs N` runs the benchmark N times, each in a fresh child
//! process (so memory, caches and CPU accounting start clean), and prints one Markdown table
//! with, per row, the median of each figure over the runs (and the range) and the median CPU
//! microseconds per item. Knows nothing of what the benchmarks measure.
//!
//! Protocol between the parent and its children: a child is the same command line with
//! `TESSERA_BENCH_ROWS=json` in its environment; it runs once and prints its rows as one JSON
//! array on the last line of its standard output.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// The environment variable that makes a bench command a child run.
const CHILD: &str = "TESSERA_BENCH_ROWS";

/// How often a benchmark is repeated.
#[derive(clap::Args, Debug, Clone)]
pub struct Repeat {
    /// How many runs to take the median of; each runs in a fresh process.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
}

/// One measured figure of a row.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    pub label: String,
    pub unit: String,
    /// None where the run could not measure it (too short to sample, say).
    pub value: Option<f64>,
}

impl Figure {
    pub fn new(label: &str, unit: &str, value: impl Into<Option<f64>>) -> Figure {
        Figure {
            label: label.into(),
            unit: unit.into(),
            value: value.into(),
        }
    }
}

/// One benchmark row of one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// The benchmark, named as upstream names it where there is an upstream counterpart.
    pub name: String,
    /// What is measured: `core (no API)`, `end-to-end (embedded API)`, ….
    pub kind: String,
    /// Items counted (pods placed, requests, decisions, experiments, …).
    pub items: u64,
    /// Process CPU seconds (all threads, user and system) spent on the items, where measured.
    pub cpu_seconds: Option<f64>,
    pub figures: Vec<Figure>,
    /// The upstream figure this row may be compared with, or why none.
    pub anchor: String,
}

/// CPU seconds this process has used (user and system, all threads), where the platform tells.
/// Resolution: the kernel's clock tick (10 ms).
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // The kernel reports in USER_HZ, 100 on every Linux architecture Tessera builds for.
    Some(ticks as f64 / 100.0)
}

/// Measures the process CPU time from creation to [`CpuClock::seconds`].
pub struct CpuClock(Option<f64>);

impl CpuClock {
    pub fn start() -> CpuClock {
        CpuClock(process_cpu_seconds())
    }
    pub fn seconds(&self) -> Option<f64> {
        process_cpu_seconds()
            .zip(self.0)
            .map(|(after, before)| (after - before).max(0.0))
    }
}

/// The median of `values` (the mean of the middle two for an even count); None when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// A figure over the runs: (median, min, max).
pub type Spread = (f64, f64, f64);

/// One row summarized over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub name: String,
    pub kind: String,
    pub runs: usize,
    pub items: Option<f64>,
    pub cpu_us_per_item: Option<f64>,
    /// (label, unit, (median, min, max)) in the order the rows gave them.
    pub figures: Vec<(String, String, Option<Spread>)>,
    pub anchor: String,
}

/// Rows of every run grouped by (name, kind) in first-seen order, each summarized.
pub fn summarize(runs: &[Vec<Row>]) -> Vec<Summary> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for row in runs.iter().flatten() {
        let key = (row.name.clone(), row.kind.clone());
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(row);
    }
    order
        .into_iter()
        .map(|key| {
            let rows = &groups[&key];
            let items: Vec<f64> = rows.iter().map(|r| r.items as f64).collect();
            let cpu: Vec<f64> = rows
                .iter()
                .filter(|r| r.items > 0)
                // Zero is below the clock tick, not free: not measured.
                .filter_map(|r| {
                    r.cpu_seconds
                        .filter(|s| *s > 0.0)
                        .map(|s| s * 1e6 / r.items as f64)
                })
                .collect();
            let mut labels: Vec<(String, String)> = Vec::new();
            for figure in rows.iter().flat_map(|r| &r.figures) {
                if !labels.iter().any(|(l, _)| *l == figure.label) {
                    labels.push((figure.label.clone(), figure.unit.clone()));
                }
            }
            let figures = labels
                .into_iter()
                .map(|(label, unit)| {
                    let values: Vec<f64> = rows
                        .iter()
                        .flat_map(|r| &r.figures)
                        .filter(|f| f.label == label)
                        .filter_map(|f| f.value)
                        .collect();
                    let range = median(&values).map(|m| {
                        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
                        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        (m, min, max)
                    });
                    (label, unit, range)
                })
                .collect();
            Summary {
                name: key.0.clone(),
                kind: key.1.clone(),
                runs: rows.len(),
                items: median(&items),
                cpu_us_per_item: median(&cpu),
                figures,
                anchor: rows.last().map(|r| r.anchor.clone()).unwrap_or_default(),
            }
        })
        .collect()
}

/// A number with as many decimals as its size needs.
fn number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 100.0 || (value.fract() == 0.0 && magnitude < 1e15) {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 0.1 || magnitude == 0.0 {
        format!("{value:.2}")
    } else {
        // Three significant digits.
        let decimals = (2.0 - magnitude.log10().floor()).clamp(0.0, 12.0) as usize;
        format!("{value:.decimals$}")
    }
}

fn unit_suffix(unit: &str) -> String {
    if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    }
}

/// The Markdown table of the summaries.
pub fn table(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "| benchmark | kind | runs | items (median) | median of runs (min–max) | CPU µs per item (median) | upstream anchor |\n|---|---|---|---|---|---|---|\n",
    );
    for s in summaries {
        let figures: Vec<String> = s
            .figures
            .iter()
            .map(|(label, unit, range)| match range {
                Some((m, lo, hi)) if s.runs > 1 && lo != hi => format!(
                    "{label} {}{} ({}–{})",
                    number(*m),
                    unit_suffix(unit),
                    number(*lo),
                    number(*hi)
                ),
                Some((m, _, _)) => format!("{label} {}{}", number(*m), unit_suffix(unit)),
                None => format!("{label} – (not measured)"),
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            s.name,
            s.kind,
            s.runs,
            s.items.map_or_else(|| "–".into(), |i| format!("{i:.0}")),
            figures.join("; "),
            s.cpu_us_per_item.map_or_else(|| "–".into(), number),
            s.anchor
        ));
    }
    out
}

/// Runs a benchmark `repeat.runs` times and prints the table of medians. In a child run (see
/// the module comment) it runs `once` a single time and prints its rows as JSON instead.
pub fn repeat(
    repeat: &Repeat,
    once: impl FnOnce() -> anyhow::Result<Vec<Row>>,
) -> anyhow::Result<()> {
    if std::env::var_os(CHILD).is_some() {
        let rows = once()?;
        println!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    let runs = if repeat.runs == 1 {
        vec![once()?]
    } else {
        (0..repeat.runs)
            .map(|run| child_run(run + 1, repeat.runs))
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    print!("{}", table(&summarize(&runs)));
    Ok(())
}

/// The same command line run once in a child process; its rows.
fn child_run(run: u32, of: u32) -> anyhow::Result<Vec<Row>> {
    let exe = std::env::current_exe().context("the running binary")?;
    eprintln!("run {run} of {of}");
    let output = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(CHILD, "json")
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("starting a benchmark run")?;
    if !output.status.success() {
        bail!("benchmark run {run} failed ({})", output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("reading the rows of run {run}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        let cases: &[(&[f64], Option<f64>)] = &[
            (&[], None),
            (&[3.0], Some(3.0)),
            (&[5.0, 1.0, 3.0], Some(3.0)),
            (&[4.0, 1.0, 3.0, 2.0], Some(2.5)),
            (&[f64::NAN, 2.0], Some(2.0)),
            (&[9.0, 1.0, 8.0, 2.0, 7.0], Some(7.0)),
        ];
        for (values, expected) in cases {
            assert_eq!(median(values), *expected, "{values:?}");
        }
    }

    fn row(name: &str, kind: &str, items: u64, cpu: Option<f64>, value: Option<f64>) -> Row {
        Row {
            name: name.into(),
            kind: kind.into(),
            items,
            cpu_seconds: cpu,
            figures: vec![Figure::new("rate", "pods/s", value)],
            anchor: "680".into(),
        }
    }

    fn table_has(summaries: &[Summary], line: &str) -> bool {
        table(summaries).lines().any(|l| l == line)
    }

    #[test]
    fn summaries_group_by_name_and_kind_and_take_medians() {
        let runs = vec![
            vec![
                row("A", "core", 100, Some(0.01), Some(10.0)),
                row("A", "api", 100, None, Some(1.0)),
            ],
            vec![
                row("A", "core", 100, Some(0.03), Some(30.0)),
                row("A", "api", 100, None, None),
            ],
            vec![
                row("A", "core", 100, Some(0.02), Some(20.0)),
                row("A", "api", 100, None, Some(3.0)),
            ],
        ];
        let summaries = summarize(&runs);
        assert_eq!(summaries.len(), 2);
        let core = &summaries[0];
        assert_eq!((core.kind.as_str(), core.runs), ("core", 3));
        assert_eq!(core.items, Some(100.0));
        // 0.02 s for 100 items: 200 µs each.
        assert!((core.cpu_us_per_item.unwrap() - 200.0).abs() < 1e-6);
        assert_eq!(core.figures[0].2, Some((20.0, 10.0, 30.0)));
        let api = &summaries[1];
        assert_eq!(api.cpu_us_per_item, None);
        // A run that could not measure a figure does not count towards its median.
        assert_eq!(api.figures[0].2, Some((2.0, 1.0, 3.0)));
        let table = table(&summaries);
        assert!(
            table.contains("| A | core | 3 | 100 | rate 20 pods/s (10–30) | 200 | 680 |"),
            "{table}"
        );
        // Equal in every run: no range; a zero CPU time is below the clock tick.
        let same = summarize(&[
            vec![row("B", "core", 10, Some(0.0), Some(2.5))],
            vec![row("B", "core", 10, Some(0.0), Some(2.5))],
        ]);
        assert_eq!(same[0].cpu_us_per_item, None);
        assert!(table_has(
            &same,
            "| B | core | 2 | 10 | rate 2.50 pods/s | – | 680 |"
        ));
    }
}
