//! Small readers over untyped JSON objects, for code that works on stored objects as
//! `serde_json::Value` rather than typed structs.
//!
//! Reading only: nothing here builds or changes an object.

use serde_json::Value;

/// JSON pointer look-ups (RFC 6901) answered as `Value::pointer` answers them, without the
/// two strings `Value::pointer` allocates for every token: a token is unescaped only when it
/// holds a `~`. Admission and validation read dozens of pointers for every object written.
pub trait Pointer {
    /// The value at `pointer` (`""` is the value itself; otherwise it starts with `/`).
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl Pointer for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        pointer
            .strip_prefix('/')?
            .split('/')
            .try_fold(self, |target, token| {
                let unescaped;
                let token = if token.contains('~') {
                    unescaped = token.replace("~1", "/").replace("~0", "~");
                    unescaped.as_str()
                } else {
                    token
                };
                match target {
                    Value::Object(map) => map.get(token),
                    Value::Array(list) => array_index(token).and_then(|i| list.get(i)),
                    _ => None,
                }
            })
    }
}

/// An array index token as serde_json reads one: digits, no sign, no leading zero.
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// The string at a JSON pointer ("" when absent or not a string).
pub fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .at(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The integer at a JSON pointer (`None` when absent or not an integer).
pub fn int(value: &Value, pointer: &str) -> Option<i64> {
    value.at(pointer).and_then(Value::as_i64)
}

/// The integer at a JSON pointer, 0 when absent or not an integer.
pub fn int_or_zero(value: &Value, pointer: &str) -> i64 {
    int(value, pointer).unwrap_or(0)
}

/// The strings of the array at a JSON pointer (non-strings skipped; empty when absent).
pub fn strings_at<B: FromIterator<String>>(value: &Value, pointer: &str) -> B {
    value
        .at(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn pointers_are_read_as_serde_json_reads_them() {
        let value = json!({"a": {"b/c": [1, {"~d": 2}], "": 3, "e": null}, "0": "zero"});
        let pointers = [
            "",
            "/",
            "/a",
            "/a/b~1c",
            "/a/b~1c/0",
            "/a/b~1c/1/~0d",
            "/a/b~1c/01",
            "/a/b~1c/+1",
            "/a/b~1c/2",
            "/a/b~1c/-",
            "/a/",
            "/a/e",
            "/a/e/x",
            "/0",
            "a",
            "/a/b/c",
            "/a~",
        ];
        for pointer in pointers {
            assert_eq!(value.at(pointer), value.pointer(pointer), "{pointer:?}");
        }
    }

    proptest! {
        #[test]
        fn any_pointer_reads_as_serde_json_reads_it(
            tokens in proptest::collection::vec("[a0-9~/+]{0,3}", 0..4),
            leading in any::<bool>(),
        ) {
            let value = json!({"a": [{"0": {"~": 1, "/": [2, 3]}}, "x"], "~1": {"+1": 4},
                               "": {"": 5}, "0": [[6]]});
            let pointer: String = tokens
                .iter()
                .enumerate()
                .map(|(i, t)| if i > 0 || leading { format!("/{t}") } else { t.clone() })
                .collect();
            prop_assert_eq!(value.at(&pointer), value.pointer(&pointer), "{:?}", pointer);
        }
    }

    #[test]
    fn reads_strings_or_nothing() {
        let object = json!({"a": {"b": "x"}, "c": 1});
        assert_eq!(text(&object, "/a/b"), "x");
        assert_eq!(text(&object, "/c"), "");
        assert_eq!(text(&object, "/missing"), "");
    }

    #[test]
    fn reads_integers_or_nothing() {
        let object = json!({"a": {"b": 7}, "c": "7", "d": 1.5});
        let table: [(&str, Option<i64>); 4] = [
            ("/a/b", Some(7)),
            ("/c", None),
            ("/d", None),
            ("/missing", None),
        ];
        for (pointer, want) in table {
            assert_eq!(int(&object, pointer), want, "{pointer}");
            assert_eq!(
                int_or_zero(&object, pointer),
                want.unwrap_or(0),
                "{pointer}"
            );
        }
    }

    #[test]
    fn reads_string_arrays_and_skips_the_rest() {
        let object = json!({"a": {"b": ["x", 1, "y"]}, "c": "not a list"});
        let table: [(&str, Vec<&str>); 3] = [
            ("/a/b", vec!["x", "y"]),
            ("/c", vec![]),
            ("/missing", vec![]),
        ];
        for (pointer, want) in table {
            let got: Vec<String> = strings_at(&object, pointer);
            assert_eq!(got, want, "{pointer}");
        }
    }
}
