//! Printing a reachability matrix as cyclonus prints its truth tables: a bordered table,
//! the `from` pods as rows and the `to` pods as upper-cased column headers, `.` for an
//! allowed pair and `X` for a blocked one; and a verdict as one line per direction. Pure text;
//! knows nothing of how the matrix was computed.

use std::fmt::Write;

use crate::evaluator::{Decision, Evaluator, PodId, Verdict};
use crate::model::{Direction, EndpointName, Protocol};

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

/// The truth table of the pods of `namespaces` (every pod when empty) for one port.
pub fn matrix_report(
    evaluator: &Evaluator,
    namespaces: &[String],
    port: u16,
    protocol: Protocol,
) -> String {
    let pods: Vec<PodId> = evaluator
        .pod_ids()
        .into_iter()
        .filter(|id| {
            namespaces.is_empty()
                || evaluator
                    .pod(*id)
                    .is_some_and(|p| namespaces.contains(&p.namespace))
        })
        .collect();
    let matrix = evaluator.matrix(&pods, port, protocol);
    let names: Vec<String> = matrix
        .pods()
        .iter()
        .filter_map(|id| evaluator.pod(*id))
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    truth_table(&format!("{protocol}/{port}"), &names, |i, j| {
        matrix.allowed(i, j)
    })
}

/// The explanation of one connection, or which end is unknown.
pub fn explain_report(
    evaluator: &Evaluator,
    from: &EndpointName,
    to: &EndpointName,
    port: u16,
    protocol: Protocol,
) -> Result<String, String> {
    let resolve = |end: &EndpointName| {
        evaluator.endpoint(end).ok_or_else(|| match end {
            EndpointName::Pod { namespace, name } => format!("pod {namespace}/{name} not found"),
            EndpointName::Address(ip) => format!("address {ip} not usable"),
        })
    };
    let verdict = evaluator.verdict(resolve(from)?, resolve(to)?, port, protocol);
    Ok(explain(&verdict))
}
