//! Checks an answer against the OpenAPI document: the documented path
//! and method, a documented status, and a JSON body valid against the
//! status's schema — strictly: a component schema accepts no property it
//! does not list, so a handler that answers a field the document does
//! not name fails too.

use std::sync::OnceLock;

use serde_json::{Value, json};

/// The document, with every component schema made strict: an object
/// accepts no property it does not list (an `allOf` of objects, what
/// `#[serde(flatten)]` makes, is merged into one object first).
fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc: Value =
            serde_json::from_str(&acts_server::openapi_json_text()).expect("the document is JSON");
        let original = doc["components"]["schemas"].clone();
        if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
            for schema in schemas.values_mut() {
                // (a schema with its own properties keeps them: its
                // `allOf` holds rules, not parts)
                if let Some(parts) = schema
                    .get("allOf")
                    .filter(|_| schema.get("properties").is_none())
                    .and_then(Value::as_array)
                    .cloned()
                {
                    *schema = merged(&parts, &original);
                }
                if schema.get("properties").is_some()
                    && schema.get("additionalProperties").is_none()
                {
                    schema["additionalProperties"] = json!(false);
                }
            }
        }
        doc
    })
}

/// The objects of an `allOf` (inline or referenced) as one object.
fn merged(parts: &[Value], schemas: &Value) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for part in parts {
        let part = match part["$ref"].as_str() {
            Some(r) => &schemas[r.rsplit('/').next().unwrap_or_default()],
            None => part,
        };
        if let Some(p) = part["properties"].as_object() {
            properties.extend(p.clone());
        }
        if let Some(r) = part["required"].as_array() {
            required.extend(r.iter().cloned());
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

/// Whether `path` fits `template` (`{x}` takes one segment); the number
/// of literal segments (the most specific template wins).
fn fits(template: &str, path: &str) -> Option<usize> {
    let t: Vec<&str> = template.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    if t.len() != p.len() {
        return None;
    }
    let mut literal = 0;
    for (a, b) in t.iter().zip(&p) {
        if a.starts_with('{') && a.ends_with('}') {
            if b.is_empty() {
                return None;
            }
        } else if a == b {
            literal += 1;
        } else {
            return None;
        }
    }
    Some(literal)
}

/// The template of the documented path `path` answers to, if any.
pub fn template_of(path: &str) -> Option<String> {
    let paths = document()["paths"].as_object()?;
    paths
        .keys()
        .filter_map(|t| fits(t, path).map(|n| (n, t)))
        .max_by_key(|(n, _)| *n)
        .map(|(_, t)| t.clone())
}

/// Validates `body` against `schema` (refs into the document's
/// components).
pub fn validate(schema: &Value, body: &Value) -> Result<(), String> {
    let mut root = schema.clone();
    if let Some(o) = root.as_object_mut() {
        o.insert("components".into(), document()["components"].clone());
    } else {
        return Ok(()); // `true`: anything
    }
    let validator = jsonschema::validator_for(&root)
        .map_err(|e| format!("the schema does not compile: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at '{}'", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Checks one answer; `Err` says what the document does not allow.
/// Paths the document does not describe (acts 0.25's routes, unknown
/// endpoints) are checked only for the error body.
pub fn check(
    method: &str,
    path: &str,
    status: u16,
    content_type: Option<&str>,
    bytes: &[u8],
) -> Result<(), String> {
    let doc = document();
    let what = format!("{method} {path} -> {status}");
    let Some(template) = template_of(path) else {
        if path.starts_with("/api/v1") && status >= 400 {
            let body: Value = serde_json::from_slice(bytes)
                .map_err(|e| format!("{what}: the error body is not JSON: {e}"))?;
            return validate(&json!({"$ref": "#/components/schemas/ErrorBody"}), &body)
                .map_err(|e| format!("{what}: {e}"));
        }
        return Ok(());
    };
    let Some(op) = doc["paths"][&template].get(method.to_ascii_lowercase()) else {
        // axum's own 405 for a method the path does not take.
        return if status == 405 {
            Ok(())
        } else {
            Err(format!("{what}: {template} has no {method}"))
        };
    };
    let Some(response) = op["responses"]
        .get(status.to_string())
        .or_else(|| op["responses"].get("default"))
    else {
        return Err(format!(
            "{what}: status {status} is not documented for {template}"
        ));
    };
    let content = response.get("content").and_then(Value::as_object);
    if bytes.is_empty() {
        return match content {
            Some(c) if !c.is_empty() && status != 204 => Err(format!(
                "{what}: an empty body, but the document promises one"
            )),
            _ => Ok(()),
        };
    }
    let Some(content) = content else {
        return Err(format!("{what}: a body, but the document says none"));
    };
    let given = content_type
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let Some((_, media)) = content
        .iter()
        .find(|(k, _)| k.split(';').next().unwrap_or("").trim() == given)
    else {
        return Err(format!(
            "{what}: content type '{given}' is not documented (documented: {:?})",
            content.keys().collect::<Vec<_>>()
        ));
    };
    if given != "application/json" {
        return Ok(());
    }
    let body: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("{what}: the body is not JSON: {e}"))?;
    validate(&media["schema"], &body).map_err(|e| format!("{what}: {e}\nbody: {body}"))
}
