//! The self-contained HTML report of a run: the summary's figures, a table per namespace, and
//! line charts (inline SVG, no scripts, no external files) of GPU allocation, fragmentation and
//! waiting pods over time. Opens in any browser, offline.
//!
//! Pure: a summary in, a string out.

use std::fmt::Write;

use crate::timeline::{Figures, Sample, Summary};

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Seconds as a short duration (`3d 4h`, `5h 12m`, `42s`).
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as i64;
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {}s", s % 60)
    } else {
        format!("{s}s")
    }
}

/// A line chart of `samples` as inline SVG.
fn chart(title: &str, unit: &str, samples: &[Sample]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 200.0;
    const PAD: f64 = 40.0;
    let max_time = samples.last().map_or(1, |s| s.time.max(1)) as f64;
    let max_value = samples
        .iter()
        .map(|s| s.value)
        .fold(0.0_f64, f64::max)
        .max(if unit == "%" { 100.0 } else { 1.0 });
    let mut points = String::new();
    for s in samples {
        let x = PAD + (W - 2.0 * PAD) * s.time as f64 / max_time;
        let y = H - PAD + -(H - 2.0 * PAD) * s.value / max_value;
        let _ = write!(points, "{x:.1},{y:.1} ");
    }
    format!(
        r##"<figure><figcaption>{title}</figcaption>
<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{title}">
<line x1="{PAD}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>
<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{bottom}" stroke="#888"/>
<text x="{PAD}" y="{label_y}" font-size="11">0</text>
<text x="{right}" y="{label_y}" font-size="11" text-anchor="end">{end}</text>
<text x="4" y="{top_y}" font-size="11">{max_value:.0}{unit}</text>
<polyline fill="none" stroke="#2b6cb0" stroke-width="1.5" points="{points}"/>
</svg></figure>
"##,
        title = escape(title),
        bottom = H - PAD,
        right = W - PAD,
        label_y = H - PAD + 16.0,
        top_y = PAD + 4.0,
        end = escape(&duration(max_time)),
    )
}

fn figures_row(name: &str, f: &Figures) -> String {
    format!(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td></tr>\n",
        escape(name),
        f.pods,
        f.placed,
        f.completed,
        f.preempted,
        f.failed,
        f.pending,
        duration(f.mean_wait),
        duration(f.p95_wait as f64),
        duration(f.mean_completion),
        f.gpu_seconds / 3600.0,
    )
}

/// The report for `summary`, titled `title`.
pub fn html(title: &str, summary: &Summary) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
td, th {{ border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
figure {{ margin: 1rem 0; }} figcaption {{ font-weight: 600; }}
</style></head><body>
<h1>{title}</h1>
<p>Policy <b>{policy}</b>, seed {seed}: {nodes} nodes, {gpus} GPUs; makespan {makespan};
time-weighted GPU allocation {alloc:.2}%.</p>
"#,
        title = escape(title),
        policy = escape(&summary.policy),
        seed = summary.seed,
        nodes = summary.nodes,
        gpus = summary.total_gpus,
        makespan = escape(&duration(summary.makespan as f64)),
        alloc = summary.mean_allocation,
    );
    out.push_str(
        "<table><tr><th>namespace</th><th>pods</th><th>placed</th><th>completed</th><th>preempted</th><th>failed</th><th>still waiting</th><th>mean wait</th><th>p95 wait</th><th>mean completion</th><th>GPU-hours</th></tr>\n",
    );
    out.push_str(&figures_row("all", &summary.overall));
    for (namespace, figures) in &summary.namespaces {
        out.push_str(&figures_row(namespace, figures));
    }
    out.push_str("</table>\n");
    out.push_str(&chart("GPU allocation", "%", &summary.allocation));
    out.push_str(&chart(
        "GPU fragmentation (FGD's measure)",
        "%",
        &summary.fragmentation,
    ));
    out.push_str(&chart("Pods waiting", "", &summary.waiting));
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_report_is_self_contained_and_escaped() {
        let summary = Summary {
            policy: "tessera".into(),
            seed: 3,
            total_gpus: 8,
            nodes: 1,
            makespan: 7200,
            overall: Figures {
                pods: 2,
                placed: 2,
                ..Figures::default()
            },
            namespaces: BTreeMap::from([("<team>".to_string(), Figures::default())]),
            mean_allocation: 50.0,
            allocation: vec![
                Sample {
                    time: 0,
                    value: 0.0,
                },
                Sample {
                    time: 7200,
                    value: 100.0,
                },
            ],
            fragmentation: vec![],
            waiting: vec![],
        };
        let page = html("a & b", &summary);
        assert!(page.starts_with("<!doctype html>"));
        assert!(page.contains("<title>a &amp; b</title>"));
        assert!(page.contains("&lt;team&gt;") && !page.contains("<team>"));
        assert!(page.contains("makespan 2h 0m"));
        assert!(page.contains("points=\"40.0,160.0 680.0,40.0 \""), "{page}");
        assert!(!page.contains("<script") && !page.contains("http"));
        assert_eq!(duration(93_784.0), "1d 2h");
        assert_eq!(duration(42.0), "42s");
    }
}
