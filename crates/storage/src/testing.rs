//! Helpers the crate's tests share.

use serde_json::Value;

/// The object with the values set at the JSON pointers (missing parents created).
pub(crate) fn with(mut object: Value, sets: &[(&str, Value)]) -> Value {
    for (pointer, value) in sets {
        let mut target = &mut object;
        for part in pointer.trim_start_matches('/').split('/') {
            target = &mut target[part];
        }
        *target = value.clone();
    }
    object
}
