//! The Kubernetes CEL environment, shared by DRA device selectors and CRD validation rules:
//! the standard library with the libraries of Kubernetes' base environment
//! (`k8s.io/apiserver/pkg/cel/environment/base.go` at 1.34) — cel-go's strings extension
//! (`charAt`, `indexOf`, `lowerAscii`, `split`, `format`, `strings.quote`, …), the sets
//! extension, `cel.bind`, and Kubernetes' lists, regex, URL, IP, CIDR, quantity and semver
//! libraries — and compilation that rejects what upstream's checker rejects for want of a
//! declaration: an unknown function or an undeclared variable.
//!
//! Knows nothing of devices, schemas or objects: callers declare their variables' names when
//! compiling and bind values when evaluating under [`root`]. Not here: the authz, format and
//! image libraries, two-variable comprehensions, static type checking and runtime cost
//! tracking (see [`cost`] for the static estimate).

mod bind;
mod check;
pub mod cost;
mod lists;
mod net;
mod quantity;
mod regexes;
mod semver;
mod sets;
mod urls;

use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};

use cel::extractors::IntoFunction;
use cel::objects::Opaque;
use cel::{Context, Env, ExecutionError, Program};

pub use crate::quantity::quantity_value;
pub use crate::semver::semver_value;

/// Why an expression does not compile, in cel-go's words (`ERROR: <input>:1:5: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(pub String);

/// The functions registered on the root context, beside the environment's overloads.
struct Library {
    context: Context<'static, 'static>,
    functions: BTreeSet<&'static str>,
    /// Registrations the interpreter refused (a name the environment declares already).
    refused: Vec<String>,
}

impl Library {
    fn add<T: 'static, F>(&mut self, name: &'static str, function: F)
    where
        F: IntoFunction<T> + 'static + Send + Sync,
    {
        match self.context.add_function(name, function) {
            Ok(()) => {
                self.functions.insert(name);
            }
            Err(error) => self.refused.push(format!("{name}: {error}")),
        }
    }
}

/// The environment: the standard library, the strings extension, the overloads that must
/// share a name with it (lists' `indexOf`, `string()` of an IP or CIDR) and `cel.bind`.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    let declared = [
        env.add_extension(cel::extensions::strings),
        lists::declare(&mut env),
        net::declare(&mut env),
        bind::declare(&mut env),
    ];
    debug_assert!(declared.iter().all(Result::is_ok), "{declared:?}");
    Arc::new(env)
});

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let mut library = Library {
        context: Context::with_env(Arc::clone(&ENV)),
        functions: BTreeSet::new(),
        refused: Vec::new(),
    };
    quantity::register(&mut library);
    semver::register(&mut library);
    register_ordering(&mut library);
    lists::register(&mut library);
    regexes::register(&mut library);
    urls::register(&mut library);
    net::register(&mut library);
    sets::register(&mut library);
    debug_assert!(library.refused.is_empty(), "{:?}", library.refused);
    library
});

/// The root context every evaluation scopes from (`root().new_inner_scope()`, then bind the
/// declared variables): the environment and the Kubernetes library functions.
pub fn root() -> &'static Context<'static, 'static> {
    &LIBRARY.context
}

/// Compiles `expression` in the Kubernetes environment: it must parse (macros expanded,
/// `cel.bind` included), and every function it calls and every variable it reads must be
/// declared — `variables` are the caller's (`device`; `self`, `oldSelf`).
pub fn compile(expression: &str, variables: &[&str]) -> Result<Program, CompileError> {
    let program = ENV
        .compile(expression)
        .map_err(|e| CompileError(e.to_string()))?;
    check::declared(&program, expression, variables, &|name| is_function(name))?;
    Ok(program)
}

/// Whether `name` is a function of the environment: an overload of the standard library or
/// an extension, or a Kubernetes library function.
fn is_function(name: &str) -> bool {
    static PROBE: LazyLock<std::sync::Mutex<Context<'static, 'static>>> =
        LazyLock::new(|| std::sync::Mutex::new(Context::with_env(Arc::clone(&ENV))));
    if LIBRARY.functions.contains(name) {
        return true;
    }
    // The interpreter refuses a context function whose name the environment declares: that
    // refusal is the only public way to ask the environment.
    let mut probe = PROBE.lock().unwrap_or_else(|p| p.into_inner());
    probe.add_function(name, || true).is_err()
}

/// Upcasts a library value for the interpreter.
fn opaque(value: impl Opaque) -> cel::Value {
    cel::Value::Opaque(Arc::new(value))
}

/// `compareTo`, `isGreaterThan` and `isLessThan`, shared by quantities and versions.
fn register_ordering(library: &mut Library) {
    use cel::extractors::This;
    type Opq = Arc<dyn Opaque>;
    fn compare(
        function: &str,
        this: &Opq,
        other: &Opq,
    ) -> Result<std::cmp::Ordering, ExecutionError> {
        quantity::ordering(this, other)
            .or_else(|| semver::ordering(this, other))
            .ok_or_else(|| {
                ExecutionError::function_error(
                    function,
                    "compares two quantities or two semantic versions",
                )
            })
    }
    library.add("compareTo", |This(this): This<Opq>, other: Opq| {
        compare("compareTo", &this, &other).map(|o| o as i64)
    });
    library.add("isGreaterThan", |This(this): This<Opq>, other: Opq| {
        compare("isGreaterThan", &this, &other).map(|o| o.is_gt())
    });
    library.add("isLessThan", |This(this): This<Opq>, other: Opq| {
        compare("isLessThan", &this, &other).map(|o| o.is_lt())
    });
}

#[cfg(test)]
mod tests;
