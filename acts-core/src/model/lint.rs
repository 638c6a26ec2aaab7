//! Warnings about a model that deploys but probably does not do what its
//! author meant: keys the language does not have, interrupts clients
//! cannot tell apart.

use serde_json::Value;

use super::{Step, UnknownKey, Workflow};

/// The warnings for `workflow` (with the unknown keys found in its source).
pub fn lint(workflow: &Workflow, unknown: &[UnknownKey]) -> Vec<String> {
    let mut out: Vec<String> = unknown.iter().map(ToString::to_string).collect();
    let mut steps: Vec<&Step> = workflow.steps.iter().collect();
    while let Some(step) = steps.pop() {
        if step.uses.as_deref() == Some("acts.core.irq") && !has_key(&step.params) {
            out.push(format!(
                "step '{}': an interrupt without params.key (clients tell interrupts apart by their key)",
                step.id
            ));
        }
        if let Some(Value::Array(acts)) = step.params.get("acts") {
            for act in acts {
                if act.get("uses").and_then(Value::as_str) == Some("acts.core.irq")
                    && !act.get("params").is_some_and(has_key)
                {
                    out.push(format!(
                        "step '{}': an interrupt act without params.key (clients tell interrupts apart by their key)",
                        step.id
                    ));
                }
            }
        }
        steps.extend(step.catches.iter());
        steps.extend(step.timeouts.iter());
        for b in &step.branches {
            steps.extend(b.steps.iter());
        }
    }
    out
}

fn has_key(params: &Value) -> bool {
    params
        .get("key")
        .and_then(Value::as_str)
        .is_some_and(|k| !k.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_about_unknown_keys_and_interrupts_without_a_key() {
        let yaml = "id: m\nver: '1'\nsteps:\n  - id: ask\n    uses: acts.core.irq\n  - id: fine\n    uses: acts.core.irq\n    params: { key: k }\n  - id: listed\n    uses: acts.core.block\n    params:\n      acts:\n        - uses: acts.core.irq\n    iff: x\n";
        let loaded = Workflow::load_yaml(yaml).expect("parses");
        let warnings = lint(&loaded.workflow, &loaded.unknown_keys);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].contains("line 14") && warnings[0].contains("'iff'"));
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("step 'ask': an interrupt without params.key"))
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("step 'listed': an interrupt act"))
        );
    }
}
