//! Finding the line of a field path (`pools[1].devices.sharing`) in a block-style YAML
//! document, so errors found after parsing can still point at the line. Flow collections
//! (`{a: 1}`, `[x]`) are not entered: the line holding them is the answer. A best effort for
//! hand-written files: `None` when the path cannot be followed.
//!
//! Pure text scanning; knows nothing of any schema.

/// A path segment.
#[derive(Debug, PartialEq, Eq)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn segments(path: &str) -> Option<Vec<Segment<'_>>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        while let Some(stripped) = rest.strip_prefix('[') {
            let end = stripped.find(']')?;
            out.push(Segment::Index(stripped[..end].parse().ok()?));
            rest = &stripped[end + 1..];
        }
    }
    Some(out)
}

/// A content line: its indent, and its text after the indent.
fn content(line: &str) -> Option<(usize, &str)> {
    let text = line.trim_start();
    if text.is_empty() || text.starts_with('#') || text == "---" {
        return None;
    }
    Some((line.len() - text.len(), text))
}

/// The 1-based line of `path` in `text`.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut position = 0usize; // where the search for the next segment starts
    let mut scope = 0usize; // the smallest indent still inside the current value
    let mut found: Option<usize> = None;
    for segment in segments(path)? {
        match segment {
            Segment::Key(key) => {
                let mut hit = None;
                for (i, line) in lines.iter().enumerate().skip(position) {
                    let Some((raw, text)) = content(line) else {
                        continue;
                    };
                    if raw < scope && found.is_some_and(|f| i > f) {
                        break;
                    }
                    // `- key: value` opens a list item whose first key sits two columns in.
                    let (indent, text) = match text.strip_prefix("- ") {
                        Some(rest) => (raw + 2, rest.trim_start()),
                        None => (raw, text),
                    };
                    if indent >= scope && text.strip_prefix(key).is_some_and(|r| r.starts_with(':'))
                    {
                        hit = Some((i, indent, text[key.len() + 1..].trim()));
                        break;
                    }
                }
                let (i, indent, value) = hit?;
                found = Some(i);
                if !value.is_empty() && !value.starts_with('#') {
                    // A scalar or flow value on the key's line: nothing deeper to find.
                    return Some(i + 1);
                }
                position = i + 1;
                scope = indent + 1;
            }
            Segment::Index(index) => {
                let mut seen = 0;
                let mut hit = None;
                let mut dash_indent = None;
                for (i, line) in lines.iter().enumerate().skip(position) {
                    let Some((indent, text)) = content(line) else {
                        continue;
                    };
                    if indent + 1 < scope {
                        break;
                    }
                    if !(text == "-" || text.starts_with("- ")) {
                        continue;
                    }
                    if *dash_indent.get_or_insert(indent) != indent {
                        continue;
                    }
                    if seen == index {
                        hit = Some((i, indent));
                        break;
                    }
                    seen += 1;
                }
                let (i, indent) = hit?;
                found = Some(i);
                // The item's first key is on the dash line: search from it.
                position = i;
                scope = indent + 1;
            }
        }
    }
    found.map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
# two pools
pools:
- name: cpu
  count: 2
  capacity:
    cpu: \"16\"
- name: gpu
  count: 1
  server: dgx-h999
  devices: {exposure: dra, sharing: {mig: {layout: all-9g}}}
  taints:
  - key: a
    effect: NoSchedule
  - key: b
    effect: Sometimes
networking:
  podCIDR: 10.244.0.0/16
";

    #[test]
    fn paths_resolve_to_their_lines() {
        let table = [
            ("kind", Some(2)),
            ("pools", Some(4)),
            ("pools[0]", Some(5)),
            ("pools[0].name", Some(5)),
            ("pools[0].capacity.cpu", Some(8)),
            ("pools[1].server", Some(11)),
            ("pools[1].devices.sharing.mig.layout", Some(12)),
            ("pools[1].taints[1].effect", Some(17)),
            ("networking.podCIDR", Some(19)),
            ("pools[2].name", None),
            ("pools[0].server", None),
            ("nothing", None),
        ];
        for (path, want) in table {
            assert_eq!(line_of(DOC, path), want, "{path}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_and_path_is_answered_without_panicking(
            text in "[ a-z:\\-\\[\\]{}#\n0-9]{0,200}",
            path in "[a-z\\[\\]0-9.]{0,30}",
        ) {
            if let Some(line) = line_of(&text, &path) {
                proptest::prop_assert!(line >= 1 && line <= text.lines().count());
            }
        }
    }
}
