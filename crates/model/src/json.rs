//! Small readers over untyped JSON objects, for code that works on stored objects as
//! `serde_json::Value` rather than typed structs.
//!
//! Reading only: nothing here builds or changes an object.

use serde_json::Value;

/// The string at a JSON pointer ("" when absent or not a string).
pub fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The integer at a JSON pointer (`None` when absent or not an integer).
pub fn int(value: &Value, pointer: &str) -> Option<i64> {
    value.pointer(pointer).and_then(Value::as_i64)
}

/// The integer at a JSON pointer, 0 when absent or not an integer.
pub fn int_or_zero(value: &Value, pointer: &str) -> i64 {
    int(value, pointer).unwrap_or(0)
}

/// The strings of the array at a JSON pointer (non-strings skipped; empty when absent).
pub fn strings_at<B: FromIterator<String>>(value: &Value, pointer: &str) -> B {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.as_str().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
