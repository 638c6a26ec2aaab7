//! [`ScriptKind`]: how a source text is evaluated.

/// How a source text is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScriptKind {
    /// An expression or statements whose completion value is the result
    /// (`if`, `while`, `run`, `${{ }}`): `a > 1`, `let x = 2; x * a`.
    Expression,
    /// A function body whose `return` value is the result
    /// (`acts.transform.code`): `return { b: a + 10 }`.
    Code,
}
