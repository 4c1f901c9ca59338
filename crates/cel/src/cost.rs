//! A static worst-case estimate of an expression's evaluation cost, for the cost limits of
//! DRA selectors and validation rules: one per node, comprehensions multiplied by how many
//! elements they can iterate. Knows no limits itself; callers compare.

/// How many elements a comprehension over something other than a list literal may see at
/// worst: a device has at most 32 attributes and capacities, a string at most 64 characters.
pub const WORST_CASE_ELEMENTS: u64 = 64;

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
