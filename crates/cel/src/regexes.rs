//! Kubernetes' regex library: `s.find(re)` (the first match, or `''`), `s.findAll(re)` and
//! `s.findAll(re, n)` (at most `n` matches; a negative `n` is all of them). Patterns are RE2
//! syntax, which the `regex` crate shares; an invalid one is an evaluation error.

use std::sync::Arc;

use cel::ExecutionError;
use cel::extractors::{Arguments, This};
use cel::objects::Value;

use crate::Library;

fn pattern(function: &str, text: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(text).map_err(|e| {
        ExecutionError::function_error(function, format!("invalid regular expression: {e}"))
    })
}

fn find_all(this: &str, args: &[Value]) -> Result<Value, ExecutionError> {
    let (re, limit) = match args {
        [Value::String(re)] => (re, -1),
        [Value::String(re), Value::Int(limit)] => (re, *limit),
        _ => {
            return Err(ExecutionError::function_error(
                "findAll",
                "expects a pattern and optionally a limit",
            ));
        }
    };
    let re = pattern("findAll", re)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Value> = re
        .find_iter(this)
        .take(limit)
        .map(|m| Value::String(Arc::new(m.as_str().to_string())))
        .collect();
    Ok(Value::List(Arc::new(found)))
}

pub(crate) fn register(library: &mut Library) {
    library.add("find", |This(this): This<Arc<String>>, re: Arc<String>| {
        let found = pattern("find", &re)?
            .find(&this)
            .map(|m| m.as_str().to_string())
            .unwrap_or_default();
        Ok::<_, ExecutionError>(Value::String(Arc::new(found)))
    });
    library.add(
        "findAll",
        |This(this): This<Arc<String>>, Arguments(args): Arguments| find_all(&this, &args),
    );
}
