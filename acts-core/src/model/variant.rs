//! [`Variant`]: a named value with an optional type (vars, env, exposes,
//! input schemas), and [`ActSchema`], a list of variants used as a schema.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Vars;

/// The JSON kind a variant declares (or infers from its literal value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum VariantType {
    /// A JSON string.
    String,
    /// A JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
}

impl VariantType {
    /// The kind of a JSON literal (`None` for null).
    pub fn of(value: &Value) -> Option<Self> {
        Some(match value {
            Value::Null => return None,
            Value::Bool(_) => VariantType::Boolean,
            Value::Number(_) => VariantType::Number,
            Value::String(_) => VariantType::String,
            Value::Array(_) => VariantType::Array,
            Value::Object(_) => VariantType::Object,
        })
    }

    /// Whether `value` is of this kind (null is accepted as "not given").
    pub fn accepts(self, value: &Value) -> bool {
        value.is_null() || VariantType::of(value) == Some(self)
    }

    /// The lowercase name (`string`, `number`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            VariantType::String => "string",
            VariantType::Number => "number",
            VariantType::Boolean => "boolean",
            VariantType::Object => "object",
            VariantType::Array => "array",
        }
    }
}

/// A named value: an item of `vars`, `env`, `exposes` or an `inputs` schema.
///
/// The type is *declared* when `type` is given, *inferred* from a literal
/// `value` (not null, not a whole-string `${{ }}` expression), and absent
/// otherwise. Serialization writes `type` only when declared or inferred, so
/// untyped variants stay untyped across a round-trip.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Variant {
    /// The variable's name.
    pub name: String,
    /// A display title.
    pub title: String,
    /// A description.
    pub desc: String,
    /// The declared or inferred type; `None` when untyped.
    pub r#type: Option<VariantType>,
    /// The value (an expression string is evaluated where the model says).
    pub value: Value,
    /// Whether an input schema requires this name.
    pub required: bool,
}

/// The inner text of `s` if `s` is exactly one `${{ expr }}` expression
/// (surrounding whitespace allowed; `${{ a }} ${{ b }}` is two, not one).
pub fn whole_expression(s: &str) -> Option<&str> {
    let after = s.trim().strip_prefix("${{")?;
    let len = super::expression::expression_len(after)?;
    if after[len + 2..].trim().is_empty() {
        let inner = after[..len].trim();
        (!inner.is_empty()).then_some(inner)
    } else {
        None
    }
}

impl Variant {
    /// Whether the value is one whole `${{ expr }}` (evaluated, not a
    /// literal or a lookup).
    pub fn is_whole_expression(&self) -> bool {
        self.value
            .as_str()
            .is_some_and(|s| whole_expression(s).is_some())
    }

    /// A variant `name = value`, typed by inference.
    pub fn create(name: impl Into<String>, value: impl Into<Value>) -> Self {
        let value = value.into();
        Self {
            name: name.into(),
            r#type: Self::infer(&value),
            value,
            ..Self::default()
        }
    }

    fn infer(value: &Value) -> Option<VariantType> {
        match value {
            Value::String(s) if whole_expression(s).is_some() => None,
            other => VariantType::of(other),
        }
    }

    /// Sets the declared type.
    pub fn with_type(mut self, t: VariantType) -> Self {
        self.r#type = Some(t);
        self
    }

    /// Marks the variant as required (input schemas).
    pub fn with_required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    /// Sets the description.
    pub fn with_desc(mut self, desc: impl Into<String>) -> Self {
        self.desc = desc.into();
        self
    }
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
struct VariantRepr {
    #[serde(default)]
    name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    desc: String,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    r#type: Option<VariantType>,
    #[serde(default)]
    value: Value,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    required: bool,
}

impl Serialize for Variant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        VariantRepr {
            name: self.name.clone(),
            title: self.title.clone(),
            desc: self.desc.clone(),
            r#type: self.r#type,
            value: self.value.clone(),
            required: self.required,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Variant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = VariantRepr::deserialize(deserializer)?;
        let r#type = r.r#type.or_else(|| Variant::infer(&r.value));
        Ok(Self {
            name: r.name,
            title: r.title,
            desc: r.desc,
            r#type,
            value: r.value,
            required: r.required,
        })
    }
}

/// A variant's schema is its wire form's.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Variant {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <VariantRepr as utoipa::PartialSchema>::schema()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Variant {
    fn schemas(
        out: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <VariantRepr as utoipa::ToSchema>::schemas(out);
    }
}

/// The variants of a list as a `Vars` map (later entries win).
pub fn variants_to_vars(list: &[Variant]) -> Vars {
    list.iter()
        .map(|v| (v.name.clone(), v.value.clone()))
        .collect()
}

/// A schema made of variants: the `inputs` of a workflow.
///
/// Absent means "accept anything"; one mapping describes a single value; a
/// list describes an object whose properties are exactly those variants
/// (undeclared properties are rejected, `required` ones must be present).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ActSchema {
    /// No schema: everything is valid.
    #[default]
    None,
    /// A list of named properties.
    Multiple(Vec<Variant>),
    /// One value.
    Simple(Variant),
}

impl ActSchema {
    /// Whether there is no schema.
    pub fn is_none(&self) -> bool {
        matches!(self, ActSchema::None)
    }

    /// Checks `vars` against the schema; the error says what is wrong.
    pub fn check(&self, vars: &Vars) -> Result<(), String> {
        match self {
            ActSchema::None => Ok(()),
            ActSchema::Simple(v) => match (v.r#type, vars.get(&v.name)) {
                (_, None) if v.required => Err(format!("'{}' is required", v.name)),
                (Some(t), Some(value)) if !t.accepts(value) => Err(format!(
                    "'{}' must be a {}, got {value}",
                    v.name,
                    t.as_str()
                )),
                _ => Ok(()),
            },
            ActSchema::Multiple(list) => {
                for v in list {
                    match vars.get(&v.name) {
                        None if v.required => return Err(format!("'{}' is required", v.name)),
                        Some(value) => {
                            if let Some(t) = v.r#type
                                && !t.accepts(value)
                            {
                                return Err(format!(
                                    "'{}' must be a {}, got {value}",
                                    v.name,
                                    t.as_str()
                                ));
                            }
                        }
                        None => {}
                    }
                }
                if let Some(extra) = vars.keys().find(|k| !list.iter().any(|v| &v.name == *k)) {
                    let declared: Vec<&str> = list.iter().map(|v| v.name.as_str()).collect();
                    return Err(format!(
                        "'{extra}' is not a declared input (declared: {})",
                        declared.join(", ")
                    ));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_is_declared_inferred_or_absent() {
        let vs: Vec<Variant> = serde_json::from_value(json!([
            {"name": "a", "type": "number"},
            {"name": "b", "value": "text"},
            {"name": "c", "value": "${{ a + 1 }}"},
            {"name": "d"}
        ]))
        .unwrap();
        let types: Vec<_> = vs.iter().map(|v| v.r#type).collect();
        assert_eq!(
            types,
            vec![
                Some(VariantType::Number),
                Some(VariantType::String),
                None,
                None
            ]
        );
        // Untyped variants stay untyped across a round-trip.
        let back = serde_json::to_value(&vs).unwrap();
        assert_eq!(back[2].get("type"), None);
        assert_eq!(back[1]["type"], "string");
    }

    #[test]
    fn multiple_schema_rejects_undeclared_missing_and_mistyped_inputs() {
        let schema = ActSchema::Multiple(vec![
            Variant::create("days", 1).with_required(true),
            Variant::create("reason", "x"),
        ]);
        let vars = |v: Value| v.as_object().unwrap().clone();
        assert!(schema.check(&vars(json!({"days": 3}))).is_ok());
        assert_eq!(
            schema.check(&vars(json!({"reason": "r"}))).unwrap_err(),
            "'days' is required"
        );
        assert!(
            schema
                .check(&vars(json!({"days": "3"})))
                .unwrap_err()
                .contains("must be a number")
        );
        assert!(
            schema
                .check(&vars(json!({"days": 3, "pid": "p"})))
                .unwrap_err()
                .contains("'pid' is not a declared input")
        );
        assert!(ActSchema::None.check(&vars(json!({"x": 1}))).is_ok());
    }
}
