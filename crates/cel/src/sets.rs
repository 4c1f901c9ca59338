//! cel-go's sets extension: `sets.contains(a, b)` (every element of `b` is in `a`),
//! `sets.equivalent(a, b)` (each contains the other) and `sets.intersects(a, b)` (an element
//! in common), with CEL equality.

use std::sync::Arc;

use cel::objects::Value;

use crate::Library;

type List = Arc<Vec<Value>>;

fn contains(a: &[Value], b: &[Value]) -> bool {
    b.iter().all(|x| a.contains(x))
}

pub(crate) fn register(library: &mut Library) {
    library.add("sets.contains", |a: List, b: List| contains(&a, &b));
    library.add("sets.equivalent", |a: List, b: List| {
        contains(&a, &b) && contains(&b, &a)
    });
    library.add("sets.intersects", |a: List, b: List| {
        b.iter().any(|x| a.contains(x))
    });
}
