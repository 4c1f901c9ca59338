#[test]
fn placeholder_compiles() {}
