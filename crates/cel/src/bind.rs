//! `cel.bind(name, init, expr)` (cel-go's bindings extension): `expr` with `name` bound to
//! `init`, evaluated once — expanded at parse time into a comprehension over an empty list
//! whose accumulator is the binding, as cel-go expands it.

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env};

fn expand(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let call = match target.as_ref() {
        Some(IdedExpr {
            id,
            expr: Expr::Ident(name),
        }) if name == "cel" => *id,
        _ => return Ok(None),
    };
    let name = match args.first().map(|a| &a.expr) {
        Some(Expr::Ident(name)) => name.clone(),
        _ => {
            let id = args.first().map_or(call, |a| a.id);
            return Err(
                helper.new_error(id, "cel.bind() variable names must be simple identifiers")
            );
        }
    };
    *target = None;
    let [_, init, body]: [IdedExpr; 3] = std::mem::take(args)
        .try_into()
        .map_err(|_| helper.new_error(call, "cel.bind() takes three arguments"))?;
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(name)),
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

pub(crate) fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_macro(Macro::receiver("bind", 3, expand))
}
