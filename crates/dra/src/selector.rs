//! CEL device selectors in the Kubernetes DRA environment: the shared Kubernetes CEL
//! environment of `tessera-cel` (strings, lists, sets, regex, URL, IP/CIDR, quantity and
//! semver libraries, `cel.bind`) with the `device` variable (`driver`,
//! `attributes[<domain>].<id>`, `capacity[<domain>].<id>`, `allowMultipleAllocations`), and
//! upstream's rules: an expression must declare nothing beyond `device` and the libraries,
//! return a bool, be at most 10 KiB long and within the cost limit (a static worst-case
//! estimate, comprehensions multiplied by what they can iterate); a domain no attribute uses
//! is an empty map (so `'x' in device.attributes['other.com']` is false), while reading a
//! missing field is an error that aborts the allocation, not a mismatch.
//!
//! Pure: compiles and evaluates; knows nothing of slices or claims beyond a device's view.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use cel::Program;
use cel::objects::{Key, Map, Value};
use tessera_cel::cost::estimated_cost;
use tessera_cel::{quantity_value, semver_value};
use tessera_model::quantity::Quantity;

/// Upstream's `CELSelectorExpressionMaxLength`.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// Upstream's `CELSelectorExpressionMaxCost`.
pub const MAX_COST: u64 = 1_000_000;

/// How many compiled selectors the compile cache keeps before it starts over.
pub const COMPILE_CACHE_LIMIT: usize = 4096;

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

/// Domains an expression names literally in `attributes[...]` / `capacity[...]`: they are
/// present (empty when the device has none) so membership tests read false, not error.
static DOMAIN_INDEX: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r#"(?:attributes|capacity)\s*\[\s*(?:'([^']*)'|"([^"]*)")\s*\]"#)
        .unwrap_or_else(|_| unreachable!("a fixed, valid pattern"))
});

/// A compiled selector.
#[derive(Clone)]
pub struct Selector {
    /// Never reused: a compile gives each program its own, so verdicts cached under it can
    /// not be inherited by another expression once the compile cache starts over.
    id: u64,
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
    /// A selector of a kind this version does not know (no `cel`).
    #[error("CEL expression empty (unsupported selector type?)")]
    Unsupported,
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
        if cache.len() >= COMPILE_CACHE_LIMIT {
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
        let program = tessera_cel::compile(expression, &["device"]).map_err(|e| fail(e.0))?;
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
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Ok(Selector {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            expression: expression.into(),
            program: Arc::new(program),
            domains: Arc::new(domains),
        })
    }

    /// A number naming this compiled program for caches: equal for clones, never given to
    /// another compile (unlike an address, which a later program may reuse).
    pub fn identity(&self) -> u64 {
        self.id
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
        let mut context = tessera_cel::root().new_inner_scope();
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
                Attribute::Version(v) => semver_value(v.clone()),
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
                quantity_value(*quantity),
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

    /// Identities key cached verdicts: two expressions compiled one after another must never
    /// share one, even when the compile cache starts over and frees the earlier programs (a
    /// program's address would be reused).
    #[test]
    fn identities_are_never_reused() {
        let mut seen = BTreeSet::new();
        for i in 0..2 * COMPILE_CACHE_LIMIT + 2 {
            let selector =
                Selector::compile(&format!("device.driver == 'identity-{i}'")).expect("compiles");
            assert!(seen.insert(selector.identity()), "identity reused at {i}");
        }
        // A clone is the same program.
        let selector = Selector::compile("device.driver == 'identity-0'").expect("compiles");
        assert_eq!(selector.clone().identity(), selector.identity());
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
