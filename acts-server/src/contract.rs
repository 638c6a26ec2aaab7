//! The rules the server enforces on a request that the handlers' types
//! cannot say by themselves, written into the OpenAPI document, so that
//! every request the document allows is one the server takes (the API
//! fuzzer checks it: `scripts/fuzz-api.sh`, every check on):
//!
//! - every integer carries the bounds of its type (a `rev` above u32 is
//!   outside the document, not a surprise 400); a whole number written
//!   with a fraction (`10.0`) is read as the integer up to 2^53, beyond
//!   which a number must be written as an integer;
//! - a cursor's shape: hex of a key (a task query's: a process cursor and
//!   a task id); every text of that shape is a place to go on from;
//! - a variable condition needs its model, and its bounds are of one kind;
//! - a bulk job names a filter or `all: true`, and only the options its
//!   action takes; its pace and reason have bounds;
//!
//! (What the handlers' annotations can say stays there: a model's body is
//! a mapping whose rules are MODEL.md's — the one request the document
//! describes in words, answered `400 bad_model`; a migration's model is
//! the path's.)
//!
//! Rules that depend on what is deployed (a variable the model does not
//! index, a migration to the version the processes are on) are answered
//! `409 conflict`; unknown resources `404`.
//!
//! May use: the facade `acts`.

use serde_json::{Map, Value, json};

/// `doc` (the document as JSON) with the rules above written in.
pub(crate) fn tighten(doc: &mut Value) {
    bound_integers(doc);
    shape_cursors(doc);
    if let Some(schemas) = doc.pointer_mut("/components/schemas") {
        for (name, rules) in component_rules() {
            if let Some(Value::Object(schema)) = schemas.get_mut(name) {
                merge(schema, &rules);
            }
        }
    }
}

/// Each integer schema without bounds gets those of its format (an
/// integer with no format and a minimum of 0 is a `usize`: u64's range).
fn bound_integers(v: &mut Value) {
    match v {
        Value::Object(fields) => {
            let integer = match fields.get("type") {
                Some(Value::String(t)) => t == "integer",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
                _ => false,
            };
            if integer {
                let range: Option<(Value, Value)> =
                    match fields.get("format").and_then(Value::as_str) {
                        Some("int32") => Some((i32::MIN.into(), i32::MAX.into())),
                        Some("u-int32" | "uint32") => Some((0.into(), u32::MAX.into())),
                        Some("int64") => Some((i64::MIN.into(), i64::MAX.into())),
                        Some("u-int64" | "uint64") | None => Some((0.into(), u64::MAX.into())),
                        Some(_) => None,
                    };
                let unsigned_or_sized =
                    fields.contains_key("format") || fields.get("minimum") == Some(&json!(0));
                if let Some((min, max)) = range.filter(|_| unsigned_or_sized) {
                    fields.entry("minimum").or_insert(min);
                    fields.entry("maximum").or_insert(max);
                }
            }
            for (key, inner) in fields.iter_mut() {
                // (an example is data, not a schema)
                if key != "example" && key != "examples" {
                    bound_integers(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(bound_integers),
        _ => {}
    }
}

/// The cursor parameters and fields, with their shape.
fn shape_cursors(doc: &mut Value) {
    let cursor = json!({
        "pattern": acts::CURSOR_PATTERN,
        "description": "Where the previous page ended: its `next`, as returned (hex of a key: \
                        any text of this shape is a place, and a page goes on after it)."
    });
    if let Some(Value::Object(paths)) = doc.get_mut("paths") {
        for op in paths.values_mut().filter_map(Value::as_object_mut) {
            for params in op.values_mut().filter_map(|o| o.get_mut("parameters")) {
                for p in params.as_array_mut().into_iter().flatten() {
                    if p.get("name") == Some(&json!("cursor"))
                        && let Some(Value::Object(schema)) = p.get_mut("schema")
                    {
                        merge(schema, &cursor);
                    }
                }
            }
        }
    }
    let task_cursor = json!({
        "pattern": acts::TASK_CURSOR_PATTERN,
        "description": "Where the previous page ended: its `next`, as returned (a process \
                        cursor, and `-` with the last task's id as hex)."
    });
    for (name, shape) in [
        ("ProcessQuery", &cursor),
        ("DeliveryQuery", &cursor),
        ("TaskQuery", &task_cursor),
    ] {
        let at = format!("/components/schemas/{name}/properties/cursor");
        if let Some(Value::Object(schema)) = doc.pointer_mut(&at) {
            merge(schema, shape);
        }
    }
}

/// `rules` merged into `schema`: an object's keys one by one (so a
/// property's rule keeps the rest of its schema), an `allOf` appended to,
/// anything else set.
fn merge(schema: &mut Map<String, Value>, rules: &Value) {
    for (k, v) in rules.as_object().into_iter().flatten() {
        match (schema.get_mut(k), v) {
            (Some(Value::Array(all)), Value::Array(more)) if k == "allOf" => {
                all.extend(more.iter().cloned())
            }
            (Some(Value::Object(inner)), Value::Object(_)) => merge(inner, v),
            _ => {
                schema.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The filters of a process query (what makes a bulk job's `where` a
/// filter: its order, page size and cursor do not).
const FILTERS: [&str; 10] = [
    "model",
    "revision",
    "state",
    "started_by",
    "started_after",
    "started_before",
    "var",
    "ecode",
    "concurrency_key",
    "waiting_for",
];

/// Each component schema's rules.
fn component_rules() -> Vec<(&'static str, Value)> {
    let null = json!({"type": "null"});
    let none = json!({"type": "object", "maxProperties": 0});
    // A bound of one kind: values of `kind` (or none).
    let of_kind = |kind: &str| {
        let kind = match kind {
            "integer" => json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}),
            k => json!({"type": k}),
        };
        json!({
            "properties": {
                "eq": {"type": "null"},
                "min": {"anyOf": [kind, {"type": "null"}]},
                "max": {"anyOf": [kind, {"type": "null"}]},
            },
            "anyOf": [
                {"required": ["min"], "properties": {"min": kind}},
                {"required": ["max"], "properties": {"max": kind}},
            ],
        })
    };
    let filtered: Vec<Value> = FILTERS
        .iter()
        .map(|f| {
            let mut props = Map::new();
            props.insert((*f).into(), json!({"not": {"type": "null"}}));
            json!({"required": [f], "properties": props})
        })
        .collect();
    // The options only some actions take: absent, null or empty otherwise.
    let only = |action: &[&str], takes: &[&str]| {
        let mut props = Map::new();
        props.insert("action".into(), json!({"enum": action}));
        for (field, empty) in [
            ("reason", &null),
            ("vars", &none),
            ("step", &null),
            ("version", &null),
            ("map", &none),
        ] {
            if !takes.contains(&field) {
                props.insert(field.into(), empty.clone());
            }
        }
        json!({ "properties": props })
    };
    let mut rewind = only(&["rewind"], &["vars", "step"]);
    rewind["required"] = json!(["step"]);
    rewind["properties"]["step"] = json!({"type": "string", "minLength": 1});
    let mut migrate = only(&["migrate"], &["vars", "version", "map"]);
    migrate["required"] = json!(["version"]);
    migrate["properties"]["version"] =
        json!({"type": "integer", "minimum": 0, "maximum": u32::MAX});
    vec![
        (
            "VarFilter",
            json!({
                "description": "A condition on one indexed variable: `value == eq`, or `min <= value <= max` \
                                (at least one bound); values of one kind: strings, integers (64-bit) or booleans.",
                "anyOf": [
                    {"required": ["eq"], "properties": {"eq": {"anyOf": [
                        {"type": "string"},
                        {"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX},
                        {"type": "boolean"},
                    ]}}},
                    of_kind("string"),
                    of_kind("integer"),
                    of_kind("boolean"),
                ]
            }),
        ),
        (
            "ProcessQuery",
            json!({"anyOf": [
                {"properties": {"var": {"type": "null"}}},
                {"required": ["model"], "properties": {"model": {"type": "string"}}},
            ]}),
        ),
        (
            "BulkRequest",
            json!({
                "properties": {
                    "id": {"type": ["string", "null"], "pattern": "^[A-Za-z0-9_-]{1,64}$",
                           "description": "The job's id (letters, digits, `-`, `_`; at most 64; default: one \
                                           is drawn). A start naming the id of a job that exists starts \
                                           nothing: it returns that job when the request is the same (a \
                                           retried start) and fails with `409` otherwise."},
                    "per_second": {"type": ["integer", "null"], "minimum": 1, "maximum": acts::MAX_BULK_RATE,
                                   "description": "The job's pace, processes per second."},
                    "reason": {"type": ["string", "null"], "maxLength": acts::MAX_BULK_REASON,
                               "description": "Why (`pause`, `terminate`; recorded in each process's history)."},
                },
                "allOf": [
                    {"anyOf": [
                        {"required": ["all"], "properties": {"all": {"const": true}}},
                        {"required": ["where"], "properties": {"where": {"anyOf": filtered}}},
                    ]},
                    {"anyOf": [
                        only(&["pause", "terminate"], &["reason"]),
                        only(&["resume", "remove"], &[]),
                        only(&["retry"], &["vars"]),
                        rewind,
                        migrate,
                    ]},
                ],
            }),
        ),
    ]
}
