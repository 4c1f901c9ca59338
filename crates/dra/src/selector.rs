//! CEL device selectors in the Kubernetes DRA environment: the `device` variable (`driver`,
//! `attributes[<domain>].<id>`, `capacity[<domain>].<id>`, `allowMultipleAllocations`), the
//! quantity and semver libraries (`quantity()`, `isQuantity()`, `semver()`, `isSemver()`,
//! `compareTo`, `isGreaterThan`, `isLessThan`, `add`, `sub`, `asInteger`,
//! `asApproximateFloat`, `sign`, `isInteger`, `major`, `minor`, `patch`), and upstream's rules:
//! an expression must return a bool, at most 10 KiB long and within the cost limit (a static
//! worst-case estimate, comprehensions multiplied by what they can iterate); a domain no attribute uses is an
//! empty map (so `'x' in device.attributes['other.com']` is false), while reading a missing
//! field is an error that aborts the allocation, not a mismatch.
//!
//! Pure: compiles and evaluates; knows nothing of slices or claims beyond a device's view.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};

use cel::extractors::This;
use cel::objects::{Key, Map, Opaque, Value};
use cel::{Context, ExecutionError, Program};
use tessera_model::quantity::Quantity;

/// Upstream's `CELSelectorExpressionMaxLength`.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// Upstream's `CELSelectorExpressionMaxCost`.
pub const MAX_COST: u64 = 1_000_000;

/// How many elements a comprehension over something other than a list literal may see at
/// worst: a device has at most 32 attributes and capacities, a string at most 64 characters.
const WORST_CASE_ELEMENTS: u64 = 64;

/// A worst-case estimate of an expression's evaluation cost: one per node, comprehensions
/// (`all`, `exists`, `map`, `filter`) multiplied by how many elements they can iterate —
/// a list literal's length, or [`WORST_CASE_ELEMENTS`] — so nested ones multiply.
pub fn estimated_cost(expr: &cel::common::ast::IdedExpr) -> u64 {
    use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr};
    let node = |e: &cel::common::ast::IdedExpr| estimated_cost(e);
    // Map and struct literals: their keys and values.
    let entries = |entries: &[IdedEntryExpr]| {
        entries
            .iter()
            .map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => node(&e.key).saturating_add(node(&e.value)),
                EntryExpr::StructField(f) => node(&f.value),
            })
            .fold(0, u64::saturating_add)
    };
    1u64.saturating_add(match &expr.expr {
        Expr::Call(call) => call
            .args
            .iter()
            .map(node)
            .chain(call.target.as_deref().map(node))
            .fold(0u64, u64::saturating_add),
        Expr::Comprehension(c) => {
            let elements = match &c.iter_range.expr {
                Expr::List(list) => list.elements.len() as u64,
                _ => WORST_CASE_ELEMENTS,
            };
            let body = node(&c.loop_cond).saturating_add(node(&c.loop_step));
            node(&c.iter_range)
                .saturating_add(node(&c.accu_init))
                .saturating_add(elements.saturating_mul(body))
                .saturating_add(node(&c.result))
        }
        Expr::List(list) => list.elements.iter().map(node).fold(0, u64::saturating_add),
        Expr::Map(map) => entries(&map.entries),
        Expr::Struct(st) => entries(&st.entries),
        Expr::Select(select) => node(&select.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 0,
    })
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attribute {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    String(String),
    /// `version` (semantic version).
    Version(semver::Version),
}

/// A device as a selector sees it; attribute and capacity names are fully qualified
/// (`gpu.nvidia.com/productName`, `resource.kubernetes.io/pcieRoot`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceView {
    /// The driver.
    pub driver: String,
    /// Attributes by qualified name.
    pub attributes: BTreeMap<String, Attribute>,
    /// Capacities by qualified name.
    pub capacity: BTreeMap<String, Quantity>,
    /// Whether the device may be allocated to several claims.
    pub allow_multiple_allocations: bool,
}

/// Splits a qualified name into (domain, id); an unqualified one belongs to `driver`.
pub fn qualify<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.rsplit_once('/').unwrap_or((driver, name))
}

/// A quantity inside CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelQuantity(Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version inside CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelSemver(semver::Version);

impl Opaque for CelSemver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

fn opaque_quantity(q: Quantity) -> Value {
    Value::Opaque(Arc::new(CelQuantity(q)))
}

fn as_quantity(
    function: &str,
    value: &Arc<dyn cel::objects::Opaque>,
) -> Result<Quantity, ExecutionError> {
    value
        .downcast_ref::<CelQuantity>()
        .map(|q| q.0)
        .ok_or_else(|| ExecutionError::function_error(function, "expects a quantity"))
}

/// Orders two quantities or two versions.
fn compare(
    function: &str,
    this: &Arc<dyn cel::objects::Opaque>,
    other: &Arc<dyn cel::objects::Opaque>,
) -> Result<std::cmp::Ordering, ExecutionError> {
    if let (Some(a), Some(b)) = (
        this.downcast_ref::<CelQuantity>(),
        other.downcast_ref::<CelQuantity>(),
    ) {
        return Ok(a.0.cmp(&b.0));
    }
    if let (Some(a), Some(b)) = (
        this.downcast_ref::<CelSemver>(),
        other.downcast_ref::<CelSemver>(),
    ) {
        return Ok(a.0.cmp(&b.0));
    }
    Err(ExecutionError::function_error(
        function,
        "compares two quantities or two semantic versions",
    ))
}

fn parse_semver(text: &str) -> Option<semver::Version> {
    semver::Version::parse(text).ok()
}

type Opq = Arc<dyn cel::objects::Opaque>;

/// The root context every evaluation scopes from: the Kubernetes library functions.
static LIBRARY: LazyLock<Context<'static, 'static>> = LazyLock::new(|| {
    let mut context = Context::default();
    let declared = [
        context.add_function("quantity", |text: Arc<String>| {
            text.parse::<Quantity>()
                .map(opaque_quantity)
                .map_err(|e| ExecutionError::function_error("quantity", e.to_string()))
        }),
        context.add_function("isQuantity", |text: Arc<String>| {
            text.parse::<Quantity>().is_ok()
        }),
        context.add_function("semver", |text: Arc<String>| {
            parse_semver(&text)
                .map(|v| Value::Opaque(Arc::new(CelSemver(v))))
                .ok_or_else(|| {
                    ExecutionError::function_error(
                        "semver",
                        format!("invalid semantic version {text:?}"),
                    )
                })
        }),
        context.add_function("isSemver", |text: Arc<String>| {
            parse_semver(&text).is_some()
        }),
        context.add_function("compareTo", |This(this): This<Opq>, other: Opq| {
            compare("compareTo", &this, &other).map(|o| o as i64)
        }),
        context.add_function("isGreaterThan", |This(this): This<Opq>, other: Opq| {
            compare("isGreaterThan", &this, &other).map(|o| o.is_gt())
        }),
        context.add_function("isLessThan", |This(this): This<Opq>, other: Opq| {
            compare("isLessThan", &this, &other).map(|o| o.is_lt())
        }),
        context.add_function("sub", |This(this): This<Opq>, other: Value| {
            arithmetic("sub", &this, &other, |a, b| a.checked_sub(&b))
        }),
        context.add_function("add", |This(this): This<Opq>, other: Value| {
            arithmetic("add", &this, &other, |a, b| a.checked_add(&b))
        }),
        context.add_function("asInteger", |This(this): This<Opq>| {
            let q = as_quantity("asInteger", &this)?;
            if q.nanos() % 1_000_000_000 != 0 {
                return Err(ExecutionError::function_error(
                    "asInteger",
                    "quantity is not an integer",
                ));
            }
            i64::try_from(q.value())
                .map_err(|_| ExecutionError::function_error("asInteger", "quantity overflows int"))
        }),
        context.add_function("isInteger", |This(this): This<Opq>| {
            as_quantity("isInteger", &this)
                .map(|q| q.nanos() % 1_000_000_000 == 0 && i64::try_from(q.value()).is_ok())
        }),
        context.add_function("asApproximateFloat", |This(this): This<Opq>| {
            as_quantity("asApproximateFloat", &this).map(|q| q.nanos() as f64 / 1e9)
        }),
        context.add_function("sign", |This(this): This<Opq>| {
            as_quantity("sign", &this).map(|q| q.nanos().signum() as i64)
        }),
        context.add_function("major", |This(this): This<Opq>| {
            semver_part("major", &this, |v| v.major)
        }),
        context.add_function("minor", |This(this): This<Opq>| {
            semver_part("minor", &this, |v| v.minor)
        }),
        context.add_function("patch", |This(this): This<Opq>| {
            semver_part("patch", &this, |v| v.patch)
        }),
    ];
    debug_assert!(declared.iter().all(Result::is_ok), "{declared:?}");
    context
});

fn arithmetic(
    function: &str,
    this: &Opq,
    other: &Value,
    op: impl Fn(Quantity, Quantity) -> Option<Quantity>,
) -> Result<Value, ExecutionError> {
    let a = as_quantity(function, this)?;
    let b = match other {
        Value::Int(i) => Quantity::from_units(*i, a.format()),
        Value::Opaque(o) => as_quantity(function, o)?,
        _ => {
            return Err(ExecutionError::function_error(
                function,
                "expects a quantity or an int",
            ));
        }
    };
    op(a, b)
        .map(opaque_quantity)
        .ok_or_else(|| ExecutionError::function_error(function, "quantity overflow"))
}

fn semver_part(
    function: &str,
    this: &Opq,
    part: impl Fn(&semver::Version) -> u64,
) -> Result<i64, ExecutionError> {
    this.downcast_ref::<CelSemver>()
        .map(|v| i64::try_from(part(&v.0)).unwrap_or(i64::MAX))
        .ok_or_else(|| ExecutionError::function_error(function, "expects a semantic version"))
}

/// Domains an expression names literally in `attributes[...]` / `capacity[...]`: they are
/// present (empty when the device has none) so membership tests read false, not error.
static DOMAIN_INDEX: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r#"(?:attributes|capacity)\s*\[\s*(?:'([^']*)'|"([^"]*)")\s*\]"#)
        .unwrap_or_else(|_| unreachable!("a fixed, valid pattern"))
});

/// A compiled selector.
#[derive(Clone)]
pub struct Selector {
    expression: Arc<str>,
    program: Arc<Program>,
    domains: Arc<BTreeSet<String>>,
}

impl fmt::Debug for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Selector").field(&self.expression).finish()
    }
}

/// Why a selector cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// It does not compile or is too long.
    #[error("invalid CEL expression {expression:?}: {message}")]
    Compile {
        /// The expression.
        expression: String,
        /// Why.
        message: String,
    },
    /// Evaluating it failed (a missing field, a type error, a non-bool result).
    #[error("CEL runtime error on device {device} for {expression:?}: {message}")]
    Runtime {
        /// The device.
        device: String,
        /// The expression.
        expression: String,
        /// Why.
        message: String,
    },
}

impl Selector {
    /// Compiles `expression`, once: compiled selectors are cached by their text (as
    /// upstream's `cel.NewCache`), so claims from one template share one program.
    pub fn compile(expression: &str) -> Result<Selector, SelectorError> {
        static CACHE: LazyLock<Mutex<HashMap<String, Result<Selector, SelectorError>>>> =
            LazyLock::new(|| Mutex::new(HashMap::new()));
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(known) = cache.get(expression) {
            return known.clone();
        }
        if cache.len() >= 4096 {
            cache.clear();
        }
        let compiled = Selector::compile_uncached(expression);
        cache.insert(expression.to_string(), compiled.clone());
        compiled
    }

    fn compile_uncached(expression: &str) -> Result<Selector, SelectorError> {
        let fail = |message: String| SelectorError::Compile {
            expression: expression.to_string(),
            message,
        };
        if expression.len() > MAX_EXPRESSION_LENGTH {
            return Err(fail(format!(
                "must be at most {MAX_EXPRESSION_LENGTH} bytes, is {}",
                expression.len()
            )));
        }
        let program = Program::compile(expression).map_err(|e| fail(e.to_string()))?;
        let cost = estimated_cost(program.expression());
        if cost > MAX_COST {
            return Err(fail(format!(
                "estimated cost {cost} exceeds the limit of {MAX_COST}"
            )));
        }
        let domains = DOMAIN_INDEX
            .captures_iter(expression)
            .filter_map(|c| c.get(1).or_else(|| c.get(2)))
            .map(|m| m.as_str().to_string())
            .collect();
        Ok(Selector {
            expression: expression.into(),
            program: Arc::new(program),
            domains: Arc::new(domains),
        })
    }

    /// A number naming this compiled program for caches (equal for clones).
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.program) as usize
    }

    /// The expression text.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether `device` (named `device_id` in errors) matches.
    pub fn matches(&self, device_id: &str, device: &DeviceView) -> Result<bool, SelectorError> {
        let fail = |message: String| SelectorError::Runtime {
            device: device_id.to_string(),
            expression: self.expression.to_string(),
            message,
        };
        let mut context = LIBRARY.new_inner_scope();
        context.add_variable_from_value("device", self.device_value(device));
        match self.program.execute(&context) {
            Ok(Value::Bool(result)) => Ok(result),
            Ok(other) => Err(fail(format!(
                "must evaluate to bool, not {:?}",
                other.type_of()
            ))),
            Err(e) => Err(fail(e.to_string())),
        }
    }

    fn device_value(&self, device: &DeviceView) -> Value {
        let mut attributes: BTreeMap<String, HashMap<Key, Value>> = BTreeMap::new();
        let mut capacity: BTreeMap<String, HashMap<Key, Value>> = BTreeMap::new();
        for domain in self.domains.iter() {
            attributes.entry(domain.clone()).or_default();
            capacity.entry(domain.clone()).or_default();
        }
        for (name, value) in &device.attributes {
            let (domain, id) = qualify(name, &device.driver);
            let value = match value {
                Attribute::Int(i) => Value::Int(*i),
                Attribute::Bool(b) => Value::Bool(*b),
                Attribute::String(s) => Value::String(Arc::new(s.clone())),
                Attribute::Version(v) => Value::Opaque(Arc::new(CelSemver(v.clone()))),
            };
            attributes
                .entry(domain.to_string())
                .or_default()
                .insert(Key::String(Arc::new(id.to_string())), value);
        }
        for (name, quantity) in &device.capacity {
            let (domain, id) = qualify(name, &device.driver);
            capacity.entry(domain.to_string()).or_default().insert(
                Key::String(Arc::new(id.to_string())),
                opaque_quantity(*quantity),
            );
        }
        let nested = |maps: BTreeMap<String, HashMap<Key, Value>>| {
            Value::Map(Map {
                map: Arc::new(
                    maps.into_iter()
                        .map(|(domain, entries)| {
                            (
                                Key::String(Arc::new(domain)),
                                Value::Map(Map {
                                    map: Arc::new(entries),
                                }),
                            )
                        })
                        .collect(),
                ),
            })
        };
        let fields: HashMap<Key, Value> = [
            ("driver", Value::String(Arc::new(device.driver.clone()))),
            ("attributes", nested(attributes)),
            ("capacity", nested(capacity)),
            (
                "allowMultipleAllocations",
                Value::Bool(device.allow_multiple_allocations),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (Key::String(Arc::new(k.to_string())), v))
        .collect();
        Value::Map(Map {
            map: Arc::new(fields),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> DeviceView {
        DeviceView {
            driver: "gpu.nvidia.com".into(),
            attributes: BTreeMap::from([
                ("type".into(), Attribute::String("gpu".into())),
                (
                    "productName".into(),
                    Attribute::String("NVIDIA H100 80GB HBM3".into()),
                ),
                ("index".into(), Attribute::Int(3)),
                (
                    "driverVersion".into(),
                    Attribute::Version(semver::Version::new(570, 172, 8)),
                ),
                (
                    "resource.kubernetes.io/pcieRoot".into(),
                    Attribute::String("pci0000:5b".into()),
                ),
            ]),
            capacity: BTreeMap::from([("memory".into(), "80Gi".parse().expect("quantity"))]),
            allow_multiple_allocations: false,
        }
    }

    #[test]
    fn selectors_evaluate_in_the_dra_environment() {
        let table: [(&str, Result<bool, &str>); 16] = [
            ("device.driver == 'gpu.nvidia.com'", Ok(true)),
            (
                "device.attributes['gpu.nvidia.com'].type == 'gpu'",
                Ok(true),
            ),
            ("device.attributes['gpu.nvidia.com'].index > 2", Ok(true)),
            (
                "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:5b'",
                Ok(true),
            ),
            (
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
                Ok(true),
            ),
            (
                "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('40Gi'))",
                Ok(false),
            ),
            (
                "device.capacity['gpu.nvidia.com'].memory.sub(quantity('16Gi')).isGreaterThan(quantity('64Gi'))",
                Ok(false),
            ),
            (
                "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
                Ok(true),
            ),
            (
                "device.attributes['gpu.nvidia.com'].driverVersion.major() == 570",
                Ok(true),
            ),
            (
                "device.attributes['gpu.nvidia.com'].driverVersion == semver('570.172.8')",
                Ok(true),
            ),
            // An unknown domain is an empty map: membership is false, not an error.
            ("'model' in device.attributes['gpu.example.com']", Ok(false)),
            ("isQuantity('1Gi') && !isSemver('1.0')", Ok(true)),
            // A missing field aborts: a runtime error.
            (
                "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
                Err("runtime"),
            ),
            (
                "device.attributes['gpu.example.com'].model == 'x'",
                Err("runtime"),
            ),
            ("device.driver", Err("must evaluate to bool")),
            ("device.driver ==", Err("invalid CEL")),
        ];
        for (expression, want) in table {
            let got = Selector::compile(expression)
                .and_then(|s| s.matches("gpu.nvidia.com/n/gpu-3", &h100()));
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{expression}"),
                (Err(error), Err(part)) => {
                    let text = error.to_string();
                    assert!(
                        text.contains(part)
                            || (part == "runtime"
                                && matches!(error, SelectorError::Runtime { .. })),
                        "{expression}: {text}"
                    );
                }
                (got, want) => panic!("{expression}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn costly_expressions_are_refused() {
        let cheap = Selector::compile("device.driver == 'gpu.nvidia.com'").expect("cheap");
        assert!(estimated_cost(cheap.program.expression()) < 20);
        // Four nested comprehensions over 40-element lists: 40^4 iterations.
        let list: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let list = format!("[{}]", list.join(","));
        let nested = format!(
            "{list}.all(a, {list}.all(b, {list}.all(c, {list}.all(d, a + b + c + d >= 0))))"
        );
        let error = Selector::compile(&nested).expect_err("too costly");
        assert!(
            error.to_string().contains("exceeds the limit of 1000000"),
            "{error}"
        );
    }

    #[test]
    fn overlong_expressions_are_refused() {
        let long = format!("device.driver == '{}'", "x".repeat(MAX_EXPRESSION_LENGTH));
        let error = Selector::compile(&long).expect_err("too long");
        assert!(
            error.to_string().contains("must be at most 10240 bytes"),
            "{error}"
        );
    }
}
