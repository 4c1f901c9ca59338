//! Kubernetes' lists library: `isSorted()`, `sum()`, `min()`, `max()`, `indexOf(x)` and
//! `lastIndexOf(x)` on lists. `indexOf` and `lastIndexOf` share their names with the strings
//! extension, so they are overloads of the environment on a `list` receiver; the rest are
//! library functions.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::extractors::This;
use cel::objects::Value;
use cel::{DeclarationError, Env, ExecutionError};

use crate::Library;

fn ordered(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b).ok_or_else(|| {
        ExecutionError::function_error(
            function,
            format!("cannot compare {:?} and {:?}", a.type_of(), b.type_of()),
        )
    })
}

fn extreme(function: &str, list: &[Value], wanted: Ordering) -> Result<Value, ExecutionError> {
    let mut items = list.iter();
    let Some(mut best) = items.next() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    for item in items {
        if ordered(function, item, best)? == wanted {
            best = item;
        }
    }
    Ok(best.clone())
}

fn sum(list: &[Value]) -> Result<Value, ExecutionError> {
    let overflow = || ExecutionError::function_error("sum", "overflow");
    let mut items = list.iter();
    let Some(first) = items.next() else {
        return Ok(Value::Int(0));
    };
    items.try_fold(first.clone(), |total, item| match (&total, item) {
        (Value::Int(a), Value::Int(b)) => a.checked_add(*b).map(Value::Int).ok_or_else(overflow),
        (Value::UInt(a), Value::UInt(b)) => a.checked_add(*b).map(Value::UInt).ok_or_else(overflow),
        (Value::Float(a), Value::Float(b)) => Ok(Value::Float(a + b)),
        _ => Err(ExecutionError::function_error(
            "sum",
            format!("cannot add {:?} to {:?}", item.type_of(), total.type_of()),
        )),
    })
}

pub(crate) fn register(library: &mut Library) {
    library.add("isSorted", |This(list): This<Arc<Vec<Value>>>| {
        for pair in list.windows(2) {
            if ordered("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
                return Ok(false);
            }
        }
        Ok::<_, ExecutionError>(true)
    });
    library.add("sum", |This(list): This<Arc<Vec<Value>>>| sum(&list));
    library.add("min", |This(list): This<Arc<Vec<Value>>>| {
        extreme("min", &list, Ordering::Less)
    });
    library.add("max", |This(list): This<Arc<Vec<Value>>>| {
        extreme("max", &list, Ordering::Greater)
    });
}

/// The receiver and argument of a list search as values.
fn search_args(args: &[CowVal<'_, '_>]) -> Result<(Vec<Value>, Value), ExecutionError> {
    let [list, wanted] = args else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    let value = |v: &CowVal<'_, '_>| Value::try_from(v.as_ref() as &dyn Val);
    match value(list)? {
        Value::List(items) => Ok((items.as_ref().clone(), value(wanted)?)),
        other => Err(ExecutionError::function_error(
            "indexOf",
            format!("expects a list, not {:?}", other.type_of()),
        )),
    }
}

fn index_result<'b, 'v>(index: Option<usize>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let index = index.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX));
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(Value::Int(index))?))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (items, wanted) = search_args(&args)?;
    index_result(items.iter().position(|item| *item == wanted))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (items, wanted) = search_args(&args)?;
    index_result(items.iter().rposition(|item| *item == wanted))
}

pub(crate) fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "indexOf",
        "list.indexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )
}
