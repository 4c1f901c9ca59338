//! Kubernetes' quantity library: `quantity()`, `isQuantity()`, `sign`, `isInteger`,
//! `asInteger`, `asApproximateFloat`, `add` and `sub` (of a quantity or an int); ordering is
//! shared with versions in the crate root. Parsing and arithmetic are tessera-model's.

use std::sync::Arc;

use cel::ExecutionError;
use cel::extractors::This;
use cel::objects::{Opaque, Value};
use tessera_model::quantity::Quantity;

use crate::Library;

/// A quantity inside CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelQuantity(Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

type Opq = Arc<dyn Opaque>;

/// A quantity as a CEL value (a device's capacity).
pub fn quantity_value(quantity: Quantity) -> Value {
    crate::opaque(CelQuantity(quantity))
}

fn get(function: &str, value: &Opq) -> Result<Quantity, ExecutionError> {
    value
        .downcast_ref::<CelQuantity>()
        .map(|q| q.0)
        .ok_or_else(|| ExecutionError::function_error(function, "expects a quantity"))
}

/// How two quantities order; `None` unless both are quantities.
pub(crate) fn ordering(a: &Opq, b: &Opq) -> Option<std::cmp::Ordering> {
    Some(
        a.downcast_ref::<CelQuantity>()?
            .0
            .cmp(&b.downcast_ref::<CelQuantity>()?.0),
    )
}

fn arithmetic(
    function: &str,
    this: &Opq,
    other: &Value,
    op: impl Fn(Quantity, Quantity) -> Option<Quantity>,
) -> Result<Value, ExecutionError> {
    let a = get(function, this)?;
    let b = match other {
        Value::Int(i) => Quantity::from_units(*i, a.format()),
        Value::Opaque(o) => get(function, o)?,
        _ => {
            return Err(ExecutionError::function_error(
                function,
                "expects a quantity or an int",
            ));
        }
    };
    op(a, b)
        .map(quantity_value)
        .ok_or_else(|| ExecutionError::function_error(function, "quantity overflow"))
}

pub(crate) fn register(library: &mut Library) {
    library.add("quantity", |text: Arc<String>| {
        text.parse::<Quantity>()
            .map(quantity_value)
            .map_err(|e| ExecutionError::function_error("quantity", e.to_string()))
    });
    library.add("isQuantity", |text: Arc<String>| {
        text.parse::<Quantity>().is_ok()
    });
    library.add("sub", |This(this): This<Opq>, other: Value| {
        arithmetic("sub", &this, &other, |a, b| a.checked_sub(&b))
    });
    library.add("add", |This(this): This<Opq>, other: Value| {
        arithmetic("add", &this, &other, |a, b| a.checked_add(&b))
    });
    library.add("asInteger", |This(this): This<Opq>| {
        let q = get("asInteger", &this)?;
        if q.nanos() % 1_000_000_000 != 0 {
            return Err(ExecutionError::function_error(
                "asInteger",
                "quantity is not an integer",
            ));
        }
        i64::try_from(q.value())
            .map_err(|_| ExecutionError::function_error("asInteger", "quantity overflows int"))
    });
    library.add("isInteger", |This(this): This<Opq>| {
        get("isInteger", &this)
            .map(|q| q.nanos() % 1_000_000_000 == 0 && i64::try_from(q.value()).is_ok())
    });
    library.add("asApproximateFloat", |This(this): This<Opq>| {
        get("asApproximateFloat", &this).map(|q| q.nanos() as f64 / 1e9)
    });
    library.add("sign", |This(this): This<Opq>| {
        get("sign", &this).map(|q| q.nanos().signum() as i64)
    });
}
