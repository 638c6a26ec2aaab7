//! [`PackageRegistry`]: the packages an engine knows, with their compiled
//! params schemas.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::builtin::builtin_packages;
use super::definition::PackageDefinition;

/// Why a package could not be registered or its params were refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PackageError {
    /// A definition without an id.
    #[error("a package definition has no id")]
    MissingId,
    /// A params schema that is not valid JSON Schema.
    #[error("package '{id}': its params schema is not valid JSON Schema: {message}")]
    BadSchema {
        /// The package.
        id: String,
        /// What is wrong with the schema.
        message: String,
    },
    /// `uses` names no registered package.
    #[error("unknown package '{0}'")]
    Unknown(String),
    /// Params that do not match the package's schema.
    #[error("package '{id}': invalid params: {message}")]
    InvalidParams {
        /// The package.
        id: String,
        /// Every violation, `; `-separated, each with its JSON path.
        message: String,
    },
}

struct Entry {
    definition: PackageDefinition,
    validator: jsonschema::Validator,
}

/// The packages an engine knows. Built-ins are always present; applications
/// add their own with [`register`](Self::register). Lookups are by id.
#[derive(Clone)]
pub struct PackageRegistry {
    entries: HashMap<String, Arc<Entry>>,
}

impl std::fmt::Debug for PackageRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<&String> = self.entries.keys().collect();
        ids.sort();
        f.debug_struct("PackageRegistry")
            .field("packages", &ids)
            .finish()
    }
}

impl Default for PackageRegistry {
    fn default() -> Self {
        Self::with_builtins()
    }
}

impl PackageRegistry {
    /// A registry holding the built-in packages.
    pub fn with_builtins() -> Self {
        let mut registry = Self {
            entries: HashMap::new(),
        };
        for definition in builtin_packages() {
            // The built-in schemas are fixed and tested (see the tests below),
            // so registering them cannot fail.
            if let Err(e) = registry.register(definition) {
                unreachable!("a built-in package definition is invalid: {e}");
            }
        }
        registry
    }

    /// Adds (or replaces) a package; its params schema is compiled now, so a
    /// bad schema is refused here, not when an act runs.
    pub fn register(&mut self, definition: PackageDefinition) -> Result<(), PackageError> {
        if definition.id.trim().is_empty() {
            return Err(PackageError::MissingId);
        }
        let schema = if definition.schema.is_null() {
            Value::Object(Default::default())
        } else {
            definition.schema.clone()
        };
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| PackageError::BadSchema {
                id: definition.id.clone(),
                message: e.to_string(),
            })?;
        self.entries.insert(
            definition.id.clone(),
            Arc::new(Entry {
                definition,
                validator,
            }),
        );
        Ok(())
    }

    /// The definition of package `id`.
    pub fn get(&self, id: &str) -> Option<&PackageDefinition> {
        self.entries.get(id).map(|e| &e.definition)
    }

    /// Whether package `id` is registered.
    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    /// Every registered package id, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// Checks `params` against package `id`'s schema.
    pub fn check_params(&self, id: &str, params: &Value) -> Result<(), PackageError> {
        let entry = self
            .entries
            .get(id)
            .ok_or_else(|| PackageError::Unknown(id.to_owned()))?;
        let errors: Vec<String> = entry
            .validator
            .iter_errors(params)
            .map(|e| {
                let path = e.instance_path().to_string();
                // An enum's every allowed value, not "or 8 other candidates".
                let what = match e.kind() {
                    jsonschema::error::ValidationErrorKind::Enum { options } => {
                        let allowed: Vec<String> = options
                            .as_array()
                            .map(|a| a.iter().map(Value::to_string).collect())
                            .unwrap_or_default();
                        format!("{} is not one of {}", e.instance(), allowed.join(", "))
                    }
                    _ => e.to_string(),
                };
                if path.is_empty() {
                    what
                } else {
                    format!("at {path}: {what}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(PackageError::InvalidParams {
                id: id.to_owned(),
                message: errors.join("; "),
            })
        }
    }
}

impl crate::model::PackageLookup for PackageRegistry {
    fn is_known(&self, id: &str) -> bool {
        self.contains(id)
    }

    fn check_params(&self, id: &str, params: &Value) -> Result<(), String> {
        PackageRegistry::check_params(self, id, params).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::RunAs;
    use serde_json::json;

    #[test]
    fn builtins_are_registered_with_their_run_modes() {
        let r = PackageRegistry::with_builtins();
        assert_eq!(r.ids().len(), 9);
        assert_eq!(r.get("acts.core.irq").map(|d| d.run_as), Some(RunAs::Irq));
        assert_eq!(r.get("acts.core.msg").map(|d| d.run_as), Some(RunAs::Msg));
        assert_eq!(
            r.get("acts.transform.code").map(|d| d.run_as),
            Some(RunAs::Func)
        );
    }

    #[test]
    fn builtin_params_are_checked() {
        let r = PackageRegistry::with_builtins();
        assert!(
            r.check_params("acts.core.irq", &json!({"key": "a"}))
                .is_ok()
        );
        assert!(r.check_params("acts.core.irq", &Value::Null).is_ok());
        assert!(r.check_params("acts.core.irq", &json!("text")).is_err());
        assert!(
            r.check_params("acts.transform.code", &json!("return {}"))
                .is_ok()
        );
        let err = r
            .check_params("acts.core.parallel", &json!({"in": [1], "acts": []}))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("package 'acts.core.parallel': invalid params: at /in/0:"),
            "{err}"
        );
        let err = r
            .check_params("acts.core.action", &json!({"action": "explode"}))
            .unwrap_err();
        assert!(err.to_string().contains("/action"), "{err}");
        // Every allowed value is named; the aliases are allowed.
        for name in crate::model::ACTION_NAMES {
            assert!(err.to_string().contains(&format!("\"{name}\"")), "{err}");
            assert!(
                r.check_params("acts.core.action", &json!({"action": name}))
                    .is_ok(),
                "{name}"
            );
            assert!(
                name.parse::<crate::scheduler::Action>().is_ok(),
                "{name} is an action"
            );
        }
        assert!(!err.to_string().contains("candidates"), "{err}");
        assert!(
            r.check_params("acts.core.subflow", &json!({}))
                .unwrap_err()
                .to_string()
                .contains("\"to\" is a required property")
        );
        assert_eq!(
            r.check_params("nope", &Value::Null),
            Err(PackageError::Unknown("nope".into()))
        );
    }

    #[test]
    fn application_packages_need_an_id_and_a_valid_schema() {
        let mut r = PackageRegistry::with_builtins();
        assert_eq!(
            r.register(PackageDefinition::new("", RunAs::Func, json!({}))),
            Err(PackageError::MissingId)
        );
        let bad = r.register(PackageDefinition::new(
            "app.bad",
            RunAs::Func,
            json!({"type": 7}),
        ));
        assert!(
            matches!(bad, Err(PackageError::BadSchema { .. })),
            "{bad:?}"
        );
        r.register(PackageDefinition::new(
            "app.mail",
            RunAs::Func,
            json!({"type": "object", "required": ["to"]}),
        ))
        .unwrap();
        assert!(r.contains("app.mail"));
        assert!(r.check_params("app.mail", &json!({"to": "a@b"})).is_ok());
        assert!(r.check_params("app.mail", &json!({})).is_err());
    }
}
