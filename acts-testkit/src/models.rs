//! Model texts that tests and benchmarks share (YAML strings only: the
//! testkit does not depend on the engine).

/// One process per customer at a time (`concurrency:`, key
/// `cust-<customer>`, limit 1); each waits for an answer (key `approve`).
pub const ONE_PER_CUSTOMER: &str = r#"
id: order
ver: "1"
concurrency:
  key: cust-${{ customer }}
  limit: 1
steps:
  - id: approve
    uses: acts.core.irq
    params: { key: approve }
"#;

/// One desk for every process (id `desk`): its step `approve` has a
/// step key (`the-desk`, limit 1) and waits for an answer (key
/// `approve`), so one task of all the processes waits for an answer at a
/// time and the others wait at the gate.
pub const ONE_DESK: &str = r#"
id: desk
ver: "1"
steps:
  - id: approve
    uses: acts.core.irq
    params: { key: approve }
    concurrency: { key: the-desk, limit: 1 }
"#;

/// Each process waits for an answer (key `ask`; id `asking`).
pub const ASKING: &str = r#"
id: asking
ver: "1"
steps:
  - id: ask
    uses: acts.core.irq
    params: { key: ask }
"#;

/// A charge that fails (ecode `declined`) until the process variable
/// `fixed` is true, then a person confirms (key `confirm`; id `flaky`):
/// the processes a bulk retry with `fixed: true` sets going again.
pub const FLAKY_CHARGE: &str = r#"
id: flaky
ver: "1"
steps:
  - id: charge
    if: typeof fixed === "undefined" || fixed !== true
    uses: acts.core.action
    params:
      action: error
      options: { ecode: declined, message: card declined }
  - id: confirm
    uses: acts.core.irq
    params: { key: confirm }
"#;

/// The three-step model of the end-to-end scenarios and the bursts
/// (`set`, `code`, `set`; id `three`): outputs `a: 10, b: 20, c: 30`.
pub const THREE_STEPS: &str = r#"
id: three
ver: "1"
steps:
  - id: step1
    uses: acts.transform.set
    params: { a: 10 }
  - id: step2
    uses: acts.transform.code
    params: "return { b: a + 10 }"
  - id: step3
    uses: acts.transform.set
    params: { c: 30 }
"#;

/// What each step of [`linear_model`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinearStep {
    /// `acts.transform.set`, step *i* setting its own key `v<i>`.
    Set,
    /// `acts.core.irq` with key `k<i>` (answered by the test).
    Irq,
}

/// A model `id` of `n` steps in a line, each doing `step` — the shape that
/// shows whether a cost grows with the steps before it.
pub fn linear_model(id: &str, n: usize, step: LinearStep) -> String {
    let mut y = format!("id: {id}\nver: '1'\nsteps:\n");
    for i in 0..n {
        y.push_str(&match step {
            LinearStep::Set => {
                format!("  - id: s{i}\n    uses: acts.transform.set\n    params: {{ v{i}: {i} }}\n")
            }
            LinearStep::Irq => {
                format!("  - id: s{i}\n    uses: acts.core.irq\n    params: {{ key: k{i} }}\n")
            }
        });
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linear_model_has_n_steps_of_its_kind() {
        let y = linear_model("m", 3, LinearStep::Irq);
        assert!(y.starts_with("id: m\nver: '1'\nsteps:\n"));
        assert_eq!(y.matches("acts.core.irq").count(), 3);
        assert!(y.contains("key: k2"));
        assert_eq!(
            linear_model("m", 2, LinearStep::Set)
                .matches("v1: 1")
                .count(),
            1
        );
    }
}
