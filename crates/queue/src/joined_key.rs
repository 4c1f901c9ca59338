//! `namespace/name` keys (Workloads, LocalQueues) looked up without allocating them: the two
//! parts are joined into a buffer on the stack for the look-up. A pass looks its pending
//! Workloads' LocalQueues up several times each; formatting a fresh `String` for every
//! look-up was a tenth of a pass. Knows nothing of the maps looked into.

/// The longest key joined on the stack: a namespace (63 bytes at most) and a name (253),
/// with the slash. A longer one (no valid object has one) is joined on the heap.
const STACK_KEY: usize = 320;

/// Calls `with` with `namespace/name`.
pub fn with_joined<R>(namespace: &str, name: &str, with: impl FnOnce(&str) -> R) -> R {
    let length = namespace.len() + 1 + name.len();
    if length > STACK_KEY {
        return with(&format!("{namespace}/{name}"));
    }
    let mut buffer = [0u8; STACK_KEY];
    buffer[..namespace.len()].copy_from_slice(namespace.as_bytes());
    buffer[namespace.len()] = b'/';
    buffer[namespace.len() + 1..length].copy_from_slice(name.as_bytes());
    match std::str::from_utf8(&buffer[..length]) {
        Ok(key) => with(key),
        // Two valid strings and an ASCII slash always join into a valid one.
        Err(_) => with(&format!("{namespace}/{name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::with_joined;

    #[test]
    fn joins_short_and_long_parts_alike() {
        let long = "n".repeat(400);
        let cases = [
            ("ns", "a", "ns/a".to_owned()),
            ("", "", "/".to_owned()),
            ("ünïcode", "名前", "ünïcode/名前".to_owned()),
            ("ns", long.as_str(), format!("ns/{long}")),
            (
                &long[..63],
                &long[..253],
                format!("{}/{}", &long[..63], &long[..253]),
            ),
        ];
        for (namespace, name, want) in cases {
            assert_eq!(with_joined(namespace, name, str::to_owned), want);
        }
    }
}
