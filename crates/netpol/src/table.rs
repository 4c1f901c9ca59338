//! Printing a reachability matrix as cyclonus prints its truth tables: a bordered table,
//! the `from` pods as rows and the `to` pods as upper-cased column headers, `.` for an
//! allowed pair and `X` for a blocked one; and a verdict as one line per direction. Pure text;
//! knows nothing of how the matrix was computed.

use std::fmt::Write;

use crate::evaluator::{Decision, Verdict};
use crate::model::Direction;

/// The table of `allowed(from, to)` over `names` (`namespace/pod`), headed by `corner`
/// (cyclonus puts the port and protocol there, e.g. `TCP/80`).
pub fn truth_table(
    corner: &str,
    names: &[String],
    allowed: impl Fn(usize, usize) -> bool,
) -> String {
    let headers: Vec<String> = names.iter().map(|n| n.to_uppercase()).collect();
    let first = names
        .iter()
        .map(String::len)
        .chain([corner.len()])
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = headers.iter().map(|h| h.len().max(1)).collect();
    let mut out = String::new();
    let border = |out: &mut String| {
        out.push('+');
        out.push_str(&"-".repeat(first + 2));
        for w in &widths {
            out.push('+');
            out.push_str(&"-".repeat(w + 2));
        }
        out.push_str("+\n");
    };
    border(&mut out);
    let _ = write!(out, "| {corner:^first$} ");
    for (h, w) in headers.iter().zip(&widths) {
        let _ = write!(out, "| {h:^w$} ");
    }
    out.push_str("|\n");
    border(&mut out);
    for (i, name) in names.iter().enumerate() {
        let _ = write!(out, "| {name:<first$} ");
        for (j, w) in widths.iter().enumerate() {
            let mark = if allowed(i, j) { "." } else { "X" };
            let _ = write!(out, "| {mark:<w$} ");
        }
        out.push_str("|\n");
    }
    border(&mut out);
    out
}

/// One line per direction and a result line: which tier, policy and rule decided.
pub fn explain(verdict: &Verdict) -> String {
    let mut out = String::new();
    for (direction, decision) in [
        (Direction::Egress, &verdict.egress),
        (Direction::Ingress, &verdict.ingress),
    ] {
        let _ = writeln!(out, "{:<8} {}", direction.as_str(), describe(decision));
    }
    let (direction, decision) = verdict.decided_by();
    let _ = writeln!(
        out,
        "{}: decided by {} ({})",
        if verdict.allowed { "ALLOWED" } else { "DENIED" },
        direction.as_str(),
        describe(decision)
    );
    out
}

fn describe(decision: &Decision) -> String {
    let verb = if decision.allowed { "allow" } else { "deny" };
    let Some(policy) = &decision.policy else {
        return format!("{verb}: tier {}, no policy applies", decision.tier.as_str());
    };
    let rule = match &decision.rule {
        Some(rule) => match &rule.name {
            Some(name) => format!("rule {} ({name})", rule.index),
            None => format!("rule {}", rule.index),
        },
        None => "no rule matches: the pod is isolated".to_string(),
    };
    format!("{verb}: tier {}, {policy}, {rule}", decision.tier.as_str())
}
