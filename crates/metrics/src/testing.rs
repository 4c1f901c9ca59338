//! Test helpers: exposition text parsed into comparable samples, so a table can list its
//! expected lines as upstream's tests do (label order and float spelling aside).

use std::collections::BTreeMap;

/// `name{label="value",…}` with labels sorted → value, for every sample line of `text`
/// whose family is in `names` (all when `names` is empty).
pub fn samples(text: &str, names: &[&str]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = match line.rfind(' ') {
            Some(at) => (&line[..at], &line[at + 1..]),
            None => panic!("no value in {line:?}"),
        };
        let (name, labels) = match series.find('{') {
            Some(at) => (&series[..at], &series[at + 1..series.len() - 1]),
            None => (series, ""),
        };
        if !names.is_empty() && !names.contains(&name) {
            continue;
        }
        let mut pairs = split_labels(labels);
        pairs.sort();
        let key = format!("{name}{{{}}}", pairs.join(","));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            other => other
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        out.insert(key, value);
    }
    out
}

fn split_labels(labels: &str) -> Vec<String> {
    let mut pairs = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut escaped = false;
    for c in labels.chars() {
        if escaped {
            current.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => {
                current.push(c);
                escaped = true;
            }
            '"' => {
                current.push(c);
                quoted = !quoted;
            }
            ',' if !quoted => {
                pairs.push(std::mem::take(&mut current));
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        pairs.push(current);
    }
    pairs.into_iter().map(|p| p.trim().to_string()).collect()
}

/// Asserts that the families `names` of `got` hold exactly the `want` lines.
pub fn assert_families(case: &str, got: &str, want: &str, names: &[&str]) {
    let got = samples(got, names);
    let want = samples(want, names);
    assert_eq!(got, want, "case {case}");
}
