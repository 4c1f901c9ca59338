//! Kubernetes' semver library (version 1): `semver(s)`, `semver(s, normalize)`,
//! `isSemver(s)`, `isSemver(s, normalize)`, `major()`, `minor()`, `patch()`; ordering is
//! shared with quantities in the crate root. Normalizing accepts a leading `v`, a missing
//! minor or patch and leading zeros (`v01.2` is `1.2.0`).

use std::sync::Arc;

use cel::ExecutionError;
use cel::extractors::{Arguments, This};
use cel::objects::{Opaque, Value};

use crate::Library;

/// A semantic version inside CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelSemver(semver::Version);

impl Opaque for CelSemver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

type Opq = Arc<dyn Opaque>;

/// A version as a CEL value (a device's version attribute).
pub fn semver_value(version: semver::Version) -> Value {
    crate::opaque(CelSemver(version))
}

/// How two versions order; `None` unless both are versions.
pub(crate) fn ordering(a: &Opq, b: &Opq) -> Option<std::cmp::Ordering> {
    Some(
        a.downcast_ref::<CelSemver>()?
            .0
            .cmp(&b.downcast_ref::<CelSemver>()?.0),
    )
}

/// `text` as upstream's normalization would write it: no `v`, three parts, no leading zeros.
fn normalized(text: &str) -> String {
    let text = text.strip_prefix('v').unwrap_or(text);
    let split = text.find(['-', '+']).unwrap_or(text.len());
    let (core, rest) = text.split_at(split);
    let mut parts: Vec<String> = core
        .split('.')
        .map(|part| {
            let trimmed = part.trim_start_matches('0');
            if trimmed.is_empty() && !part.is_empty() {
                "0".to_string()
            } else {
                trimmed.to_string()
            }
        })
        .collect();
    while parts.len() < 3 {
        parts.push("0".into());
    }
    format!("{}{rest}", parts.join("."))
}

/// Parses `args` = `(text)` or `(text, normalize)`.
fn parse(function: &str, args: &[Value]) -> Result<Option<semver::Version>, ExecutionError> {
    let (text, normalize) = match args {
        [Value::String(text)] => (text, false),
        [Value::String(text), Value::Bool(normalize)] => (text, *normalize),
        _ => {
            return Err(ExecutionError::function_error(
                function,
                "expects a string and optionally a bool",
            ));
        }
    };
    let text = if normalize {
        normalized(text)
    } else {
        text.to_string()
    };
    Ok(semver::Version::parse(&text).ok())
}

fn part(
    function: &str,
    this: &Opq,
    part: impl Fn(&semver::Version) -> u64,
) -> Result<i64, ExecutionError> {
    this.downcast_ref::<CelSemver>()
        .map(|v| i64::try_from(part(&v.0)).unwrap_or(i64::MAX))
        .ok_or_else(|| ExecutionError::function_error(function, "expects a semantic version"))
}

pub(crate) fn register(library: &mut Library) {
    library.add("semver", |Arguments(args): Arguments| {
        parse("semver", &args)?.map(semver_value).ok_or_else(|| {
            ExecutionError::function_error("semver", format!("invalid semantic version {args:?}"))
        })
    });
    library.add("isSemver", |Arguments(args): Arguments| {
        parse("isSemver", &args).map(|v| v.is_some())
    });
    library.add("major", |This(this): This<Opq>| {
        part("major", &this, |v| v.major)
    });
    library.add("minor", |This(this): This<Opq>| {
        part("minor", &this, |v| v.minor)
    });
    library.add("patch", |This(this): This<Opq>| {
        part("patch", &this, |v| v.patch)
    });
}
