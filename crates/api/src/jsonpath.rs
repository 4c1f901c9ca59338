//! The JSONPath subset Kubernetes uses in `additionalPrinterColumns` and scale subresource
//! paths: `.a.b`, `.a[0]`, `.a[*].b`, `.a['dotted.key']` and filters such as
//! `.status.conditions[?(@.type=="Ready")].status`.
//!
//! Pure; malformed paths select nothing.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter {
        field: Vec<String>,
        equals: Option<Value>,
    },
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end > 0 {
                steps.push(Step::Field(after[..end].to_string()));
            }
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = bracket_end(after)?;
            let inner = after[..end].trim();
            steps.push(bracket_step(inner)?);
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Position of the `]` closing a bracket, skipping quoted text.
fn bracket_end(text: &str) -> Option<usize> {
    let mut quote = None;
    for (index, ch) in text.char_indices() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(ch),
            (None, ']') => return Some(index),
            _ => {}
        }
    }
    None
}

fn bracket_step(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(index) = inner.parse::<usize>() {
        return Some(Step::Index(index));
    }
    for quote in ['\'', '"'] {
        if let Some(key) = inner
            .strip_prefix(quote)
            .and_then(|k| k.strip_suffix(quote))
        {
            return Some(Step::Field(key.to_string()));
        }
    }
    let condition = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (left, right) = match condition.split_once("==") {
        Some((left, right)) => (left.trim(), Some(right.trim())),
        None => (condition, None),
    };
    let field: Vec<String> = left
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let equals = match right {
        None => None,
        Some(text) => Some(
            text.strip_prefix(['"', '\''])
                .and_then(|t| t.strip_suffix(['"', '\'']))
                .map(|t| Value::String(t.to_string()))
                .or_else(|| serde_json::from_str(text).ok())?,
        ),
    };
    Some(Step::Filter { field, equals })
}

/// Every value a path selects, in document order.
pub fn select<'a>(object: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut current = vec![object];
    for step in &steps {
        let mut next = Vec::new();
        for value in current {
            match step {
                Step::Field(name) => next.extend(value.get(name.as_str())),
                Step::Index(index) => next.extend(value.get(*index)),
                Step::All => match value {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Filter { field, equals } => {
                    if let Value::Array(items) = value {
                        for item in items {
                            let found = field.iter().try_fold(item, |v, f| v.get(f.as_str()));
                            let keep = match (found, equals) {
                                (Some(found), Some(want)) => found == want,
                                (Some(_), None) => true,
                                (None, _) => false,
                            };
                            if keep {
                                next.push(item);
                            }
                        }
                    }
                }
            }
        }
        current = next;
    }
    current
}

/// The JSON Pointer equivalent of a simple dotted path (`.spec.replicas` → `/spec/replicas`).
pub fn to_pointer(path: &str) -> Option<String> {
    let steps = parse(path)?;
    let mut pointer = String::new();
    for step in steps {
        match step {
            Step::Field(name) => {
                pointer.push('/');
                pointer.push_str(&name.replace('~', "~0").replace('/', "~1"));
            }
            Step::Index(index) => pointer.push_str(&format!("/{index}")),
            _ => return None,
        }
    }
    Some(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_like_kubectl() {
        let object = json!({"spec": {"replicas": 3, "queue": {"name": "a"}},
            "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Admitted", "status": "True"}],
                       "items": [{"n": 1}, {"n": 2}]}});
        let table = [
            (".spec.replicas", vec![json!(3)]),
            ("{.spec.queue.name}", vec![json!("a")]),
            (
                ".metadata.labels['kueue.x-k8s.io/queue-name']",
                vec![json!("team-a")],
            ),
            (
                ".status.conditions[?(@.type==\"Admitted\")].status",
                vec![json!("True")],
            ),
            (
                ".status.conditions[?(@.type=='Ready')].status",
                vec![json!("False")],
            ),
            (".status.items[*].n", vec![json!(1), json!(2)]),
            (".status.items[1].n", vec![json!(2)]),
            (".spec.missing", vec![]),
            ("spec", vec![]),
            (".status.conditions[?(", vec![]),
        ];
        for (path, want) in table {
            let got: Vec<Value> = select(&object, path).into_iter().cloned().collect();
            assert_eq!(got, want, "{path}");
        }
        assert_eq!(
            to_pointer(".spec.replicas").as_deref(),
            Some("/spec/replicas")
        );
        assert_eq!(to_pointer(".status.items[*]"), None);
    }
}
