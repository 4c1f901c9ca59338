//! The declarations check of compilation: every variable an expression reads must be declared
//! (or bound by a comprehension or `cel.bind`) and every function it calls must exist, or it
//! is refused as cel-go's checker refuses it: `undeclared reference to 'x' (in container '')`
//! at the reference's line and column. Types are not checked.

use cel::Program;
use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use crate::CompileError;

/// Identifiers that name types (`type(x) == string`).
const TYPE_NAMES: [&str; 12] = [
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "optional_type",
];

struct Checker<'a> {
    source: &'a str,
    program: &'a Program,
    variables: &'a [&'a str],
    is_function: &'a dyn Fn(&str) -> bool,
    scope: Vec<&'a str>,
}

impl<'a> Checker<'a> {
    fn undeclared(&self, id: u64, name: &str) -> CompileError {
        let offset = self
            .program
            .source_info()
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        let before = self.source.get(..offset).unwrap_or(self.source);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        let text = self.source.lines().nth(line - 1).unwrap_or_default();
        CompileError(format!(
            "ERROR: <input>:{line}:{column}: undeclared reference to '{name}' (in container '')\n | {text}\n | {}^",
            ".".repeat(column - 1)
        ))
    }

    fn visit(&mut self, expr: &'a IdedExpr) -> Result<(), CompileError> {
        match &expr.expr {
            Expr::Ident(name) => {
                let known = self.scope.iter().rev().any(|v| v == name)
                    || self.variables.contains(&name.as_str())
                    || TYPE_NAMES.contains(&name.as_str());
                if !known {
                    return Err(self.undeclared(expr.id, name));
                }
            }
            Expr::Call(call) => {
                let operator = !call.func_name.starts_with(|c: char| c.is_alphabetic());
                // `ns.f(x)`: a namespaced function, not a call on a variable `ns`.
                let namespaced = match call.target.as_deref() {
                    Some(IdedExpr {
                        expr: Expr::Ident(ns),
                        ..
                    }) if !self.scope.contains(&ns.as_str())
                        && !self.variables.contains(&ns.as_str()) =>
                    {
                        Some(format!("{ns}.{}", call.func_name))
                    }
                    _ => None,
                };
                match namespaced {
                    Some(name) if (self.is_function)(&name) => {}
                    _ => {
                        if !operator && !(self.is_function)(&call.func_name) {
                            return Err(self.undeclared(expr.id, &call.func_name));
                        }
                        if let Some(target) = call.target.as_deref() {
                            self.visit(target)?;
                        }
                    }
                }
                for arg in &call.args {
                    self.visit(arg)?;
                }
            }
            Expr::Comprehension(c) => {
                self.visit(&c.iter_range)?;
                self.visit(&c.accu_init)?;
                let depth = self.scope.len();
                self.scope.push(&c.iter_var);
                if let Some(second) = &c.iter_var2 {
                    self.scope.push(second);
                }
                self.scope.push(&c.accu_var);
                self.visit(&c.loop_cond)?;
                self.visit(&c.loop_step)?;
                self.visit(&c.result)?;
                self.scope.truncate(depth);
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.visit(element)?;
                }
            }
            Expr::Map(map) => self.entries(&map.entries)?,
            Expr::Struct(st) => self.entries(&st.entries)?,
            Expr::Select(select) => self.visit(&select.operand)?,
            Expr::Literal(_) | Expr::Unspecified => {}
        }
        Ok(())
    }

    fn entries(
        &mut self,
        entries: &'a [cel::common::ast::IdedEntryExpr],
    ) -> Result<(), CompileError> {
        for entry in entries {
            match &entry.expr {
                EntryExpr::MapEntry(e) => {
                    self.visit(&e.key)?;
                    self.visit(&e.value)?;
                }
                EntryExpr::StructField(f) => self.visit(&f.value)?,
            }
        }
        Ok(())
    }
}

/// Checks that `program` (compiled from `source`) reads only `variables` and calls only
/// functions `is_function` knows.
pub(crate) fn declared(
    program: &Program,
    source: &str,
    variables: &[&str],
    is_function: &dyn Fn(&str) -> bool,
) -> Result<(), CompileError> {
    Checker {
        source,
        program,
        variables,
        is_function,
        scope: Vec::new(),
    }
    .visit(program.expression())
}
