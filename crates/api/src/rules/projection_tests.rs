use super::*;

fn read(rule: &str, variable: &str) -> Projection {
    let program = tessera_cel::compile(rule, &["self", "oldSelf"]).expect("compiles");
    Projection::of(program.expression(), variable)
}

fn fields<const N: usize>(entries: [(&str, Projection); N]) -> Projection {
    Projection::Fields(
        entries
            .into_iter()
            .map(|(name, read)| (name.to_owned(), read))
            .collect(),
    )
}

#[test]
fn a_rule_reads_what_it_selects() {
    use Projection::{Length, Nothing, Presence, Whole};
    let cases = [
        ("self.a == 1", "self", fields([("a", Whole)])),
        ("has(self.a)", "self", fields([("a", Presence)])),
        (
            "has(self.a) && self.a.b == 1",
            "self",
            fields([("a", fields([("b", Whole)]))]),
        ),
        ("size(self.a) > 0", "self", fields([("a", Length)])),
        ("self.a.size() > 0", "self", fields([("a", Length)])),
        // Sized and selected into: the list is needed whole.
        (
            "size(self.a) > 0 && self.a.b == 1",
            "self",
            fields([("a", Whole)]),
        ),
        ("self.a.all(x, x > 0)", "self", fields([("a", Whole)])),
        ("self.a[0] == 1", "self", fields([("a", Whole)])),
        ("self == oldSelf", "self", Whole),
        ("self == oldSelf", "oldSelf", Whole),
        ("size(self) == 1", "self", Length),
        ("has(self.x) && size(self.y.z) == 1", "oldSelf", Nothing),
        (
            "has(oldSelf.s) && oldSelf.s.c.exists(c, c.t == 'R') ? size(self.p) == 1 : true",
            "oldSelf",
            fields([("s", fields([("c", Whole)]))]),
        ),
        (
            "self.__namespace__ == 'a'",
            "self",
            fields([("__namespace__", Whole)]),
        ),
        // Passed to a function whole, or bound to a name.
        ("type(self.a) == int", "self", fields([("a", Whole)])),
        (
            "cel.bind(v, self.a, v.b == 1)",
            "self",
            fields([("a", Whole)]),
        ),
        ("[self.a, 1].size() == 2", "self", fields([("a", Whole)])),
        ("{'k': self.a}.k == 1", "self", fields([("a", Whole)])),
    ];
    for (rule, variable, want) in cases {
        assert_eq!(read(rule, variable), want, "{rule} ({variable})");
    }
}

#[test]
fn reads_unite() {
    use Projection::{Length, Nothing, Presence, Whole};
    let cases = [
        (Nothing, Presence, Presence),
        (Presence, Length, Length),
        (Length, Presence, Length),
        (Length, fields([("a", Whole)]), Whole),
        (fields([("a", Whole)]), Length, Whole),
        (Presence, fields([("a", Whole)]), fields([("a", Whole)])),
        (
            fields([("a", Presence)]),
            fields([("a", Length), ("b", Whole)]),
            fields([("a", Length), ("b", Whole)]),
        ),
        (Whole, Nothing, Whole),
        (fields([("a", Whole)]), Whole, Whole),
    ];
    for (mut left, right, want) in cases {
        let shown = format!("{left:?} ∪ {right:?}");
        left.union(&right);
        assert_eq!(left, want, "{shown}");
    }
}

#[test]
fn a_value_is_converted_as_far_as_it_is_read() {
    let value = serde_json::json!({
        "metadata": {"name": "w", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {"podSets": [{"name": "main", "template": {"spec": {}}}, {"name": "b"}],
            "queueName": "q", "namespace": "n"},
        "status": {"conditions": [{"type": "QuotaReserved"}], "admission": {"clusterQueue": "cq"}}
    });
    let read = fields([
        ("metadata", Projection::Whole),
        (
            "spec",
            fields([
                ("podSets", Projection::Length),
                ("__namespace__", Projection::Whole),
                ("missing", Projection::Whole),
            ]),
        ),
        (
            "status",
            fields([
                ("conditions", Projection::Whole),
                ("admission", Projection::Presence),
            ]),
        ),
    ]);
    let converted = cel::to_value(Projected::new(&value, &read, true)).expect("converts");
    let want = cel::to_value(serde_json::json!({
        "metadata": {"name": "w"},
        "spec": {"podSets": [null, null], "__namespace__": "n"},
        "status": {"conditions": [{"type": "QuotaReserved"}], "admission": {}}
    }))
    .expect("converts");
    assert_eq!(converted, want);
}
