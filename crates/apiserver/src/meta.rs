//! Object metadata rules: names, generated names, labels, annotations, timestamps and the
//! fields only the server may set.
//!
//! Knows nothing about storage or HTTP.

use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::error::Cause;
use crate::resource::{NameRule, Resource, check_name};

/// The characters upstream uses for generated name suffixes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// RFC 3339 with second precision, as Kubernetes timestamps are written.
pub fn timestamp(time: SystemTime) -> String {
    let seconds = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let second_of_day = seconds.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// RFC 3339 with microsecond precision (`MicroTime`, used by Leases and events).
pub fn micro_timestamp(time: SystemTime) -> String {
    let micros = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_micros());
    let seconds = timestamp(time);
    format!("{}.{micros:06}Z", seconds.trim_end_matches('Z'))
}

/// Parses an RFC 3339 timestamp (`Z` or a numeric offset, optional fraction).
pub fn parse_timestamp(text: &str) -> Option<SystemTime> {
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if text.get(4..5)? != "-" || text.get(7..8)? != "-" || !matches!(text.get(10..11)?, "T" | "t" | " ")
        || !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    let mut rest = text.get(19..)?;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.get(0..1)? {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            let hours: i64 = rest.get(1..3)?.parse().ok()?;
            let minutes: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    u64::try_from(seconds)
        .ok()
        .map(|s| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A name made from a `generateName` prefix and five random characters.
pub fn generate_name(prefix: &str) -> String {
    let prefix: String = prefix.chars().take(58).collect();
    let suffix: String = (0..5)
        .map(|_| SUFFIX_ALPHABET[fastrand::usize(..SUFFIX_ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// The object's `metadata`, created if missing or not a map.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => metadata,
        _ => unreachable!("metadata was just made a map"),
    }
}

/// A string field of `metadata`.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// The object's finalizers.
pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether deletion of the object has begun.
pub fn is_deleting(object: &Value) -> bool {
    meta_str(object, "deletionTimestamp").is_some()
}

/// Checks the metadata a client supplied: name, labels and annotations.
pub fn check_metadata(resource: Resource, object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = meta_str(object, "name").unwrap_or_default();
    if let Some(problem) = check_name(name, resource.name_rule()) {
        causes.push(Cause::invalid("metadata.name", &json!(name), problem));
    }
    if let Some(Value::Object(labels)) = object.pointer("/metadata/labels") {
        for (key, value) in labels {
            let field = format!("metadata.labels");
            if let Some(problem) = check_qualified_name(key) {
                causes.push(Cause::invalid(&field, &json!(key), problem));
            }
            if let Some(value) = value.as_str()
                && let Some(problem) = check_label_value(value)
            {
                causes.push(Cause::invalid(&field, &json!(value), problem));
            }
        }
    }
    if let Some(Value::Object(annotations)) = object.pointer("/metadata/annotations") {
        let mut total = 0;
        for (key, value) in annotations {
            total += key.len() + value.as_str().map_or(0, str::len);
            if let Some(problem) = check_qualified_name(key) {
                causes.push(Cause::invalid("metadata.annotations", &json!(key), problem));
            }
        }
        if total > 256 * 1024 {
            causes.push(Cause {
                reason: "FieldValueTooLong",
                field: "metadata.annotations".into(),
                message: "Too long: must have at most 262144 bytes".into(),
            });
        }
    }
    causes
}

/// Checks a label or annotation key: an optional DNS subdomain prefix and a name.
pub fn check_qualified_name(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && check_name(prefix, NameRule::Subdomain).is_some()
    {
        return Some("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into());
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    (!ok).then(|| "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into())
}

/// Checks a label value: empty, or at most 63 alphanumerics, `-`, `_` or `.`, starting and
/// ending alphanumerically.
pub fn check_label_value(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ok = value.len() <= 63
        && value.starts_with(alnum)
        && value.ends_with(alnum)
        && value
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    (!ok).then(|| "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_keep_the_prefix() {
        let name = generate_name("web-");
        assert!(name.starts_with("web-") && name.len() == 9);
        assert!(name[4..].bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
    }

    #[test]
    fn timestamps_have_second_precision() {
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_500);
        assert_eq!(timestamp(time), "2023-11-14T22:13:20Z");
        assert_eq!(
            parse_timestamp("2023-11-14T22:13:20Z"),
            Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000))
        );
        assert_eq!(
            parse_timestamp("2023-11-14T23:13:20.123456+01:00"),
            Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000))
        );
        assert_eq!(timestamp(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
        for bad in ["", "2023-13-01T00:00:00Z", "yesterday", "2023-11-14T22:13:20"] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn label_keys_and_values() {
        assert!(check_qualified_name("app").is_none());
        assert!(check_qualified_name("nvidia.com/gpu.product").is_none());
        assert!(check_qualified_name("Bad Key").is_some());
        assert!(check_qualified_name("UPPER.example/x").is_some());
        assert!(check_label_value("NVIDIA-H100-80GB-HBM3").is_none());
        assert!(check_label_value("has space").is_some());
        assert!(check_label_value(&"a".repeat(64)).is_some());
    }
}
