//! The OpenAPI document: the committed copy (`docs/openapi.json`) is what
//! the server generates, it covers every endpoint docs/SERVER.md lists
//! (and SERVER.md every path it has), it is served without a token, and
//! the dashboard calls only documented routes.

use crate::common;
#[path = "openapi/rules.rs"]
mod rules;
use common::contract;

use std::collections::BTreeSet;
use std::path::PathBuf;

use acts::Engine;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

fn repo_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
}

#[test]
fn the_committed_document_is_what_the_server_generates() {
    let generated = acts_server::openapi_json_text();
    let path = repo_file("docs/openapi.json");
    if std::env::var_os("ACTS_BLESS_OPENAPI").is_some() {
        std::fs::write(&path, &generated).expect("docs/openapi.json is written");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/openapi.json differs from the document the server generates: after changing a \
         route or an API type, run `acts openapi > docs/openapi.json` (or \
         `ACTS_BLESS_OPENAPI=1 cargo test -p acts-server --test server_suites -- openapi::`) and commit it"
    );
}

/// `METHOD /path` of every operation of the document, parameters as `{}`.
fn documented() -> BTreeSet<String> {
    let doc: Value = serde_json::from_str(&acts_server::openapi_json_text()).expect("JSON");
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                out.insert(format!("{} {}", method.to_uppercase(), generic(path)));
            }
        }
    }
    out
}

/// `path` with every `{name}` (or `{a}:{b}`) segment as `{}`.
fn generic(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.contains('{') { "{}" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

#[test]
fn the_document_and_server_md_list_the_same_endpoints() {
    let text = std::fs::read_to_string(repo_file("docs/SERVER.md")).expect("docs/SERVER.md");
    let mut prose = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("| `") else {
            continue;
        };
        let Some((endpoint, _)) = rest.split_once('`') else {
            continue;
        };
        let Some((method, path)) = endpoint.split_once(' ') else {
            continue;
        };
        if ["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method) && path.starts_with('/') {
            prose.insert(format!("{method} {}", generic(path)));
        }
    }
    let documented = documented();
    let missing: Vec<_> = prose.difference(&documented).collect();
    let unlisted: Vec<_> = documented.difference(&prose).collect();
    assert!(
        missing.is_empty(),
        "in docs/SERVER.md but not in the OpenAPI document: {missing:?}"
    );
    assert!(
        unlisted.is_empty(),
        "in the OpenAPI document but not in docs/SERVER.md's endpoint table: {unlisted:?}"
    );
    assert!(documented.len() >= 40, "{documented:?}");
}

#[tokio::test]
async fn the_document_is_served_without_a_token_and_is_openapi_3_1() {
    let engine = Engine::builder().start().await.expect("engine");
    let auth = acts_server::Auth::from_tokens(&[acts_server::TokenConfig {
        principal: "alice".into(),
        roles: vec!["operator".into()],
        sha256: acts_server::hash_token("a-secret-token"),
    }])
    .expect("tokens");
    let app = acts_server::router_with(engine, auth);
    let req = Request::get(acts_server::OPENAPI_PATH)
        .body(Body::empty())
        .expect("request");
    let res = app.oneshot(req).await.expect("answer");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"].to_str().ok(),
        Some("application/json")
    );
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    let doc: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // Every operation answers with something, and every failure is the
    // error body with one of the listed codes.
    let codes = &doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["enum"];
    assert!(codes.as_array().is_some_and(|c| c.len() >= 15), "{codes}");
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let responses = op["responses"].as_object().expect("responses");
            assert!(!responses.is_empty(), "{method} {path}");
            assert!(
                op.get("summary").is_some(),
                "{method} {path} has no summary"
            );
        }
    }
}

/// The path templates of the dashboard's `api('METHOD', path...)` calls
/// (`{}` for what it computes).
fn dashboard_calls() -> BTreeSet<String> {
    let js = std::fs::read_to_string(repo_file("acts-server/ui/app.js")).expect("app.js");
    // The one path helper the dead-letter page uses.
    let js = js.replace(
        "path(d)",
        "`/deliveries/${encodeURIComponent(d.channel)}/${encodeURIComponent(d.msg_id)}`",
    );
    let mut out = BTreeSet::new();
    for (i, _) in js.match_indices("api('") {
        let rest = &js[i + 5..];
        let Some((method, rest)) = rest.split_once("', ") else {
            continue;
        };
        // The path expression runs to the first `,` or `)` outside a
        // `${...}` or a call.
        let mut depth = 0i32;
        let mut end = rest.len();
        for (k, c) in rest.char_indices() {
            match c {
                '(' | '{' => depth += 1,
                ')' | '}' if depth > 0 => depth -= 1,
                ',' | ')' if depth == 0 => {
                    end = k;
                    break;
                }
                _ => {}
            }
        }
        out.insert(format!("{method} {}", js_path(&rest[..end])));
    }
    out
}

/// A JavaScript path expression as a template: string parts kept,
/// computed parts `{}`, the query dropped.
fn js_path(expr: &str) -> String {
    let mut out = String::new();
    let mut chars = expr.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '`') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (Some('`'), '$') if chars.peek() == Some(&'{') => {
                let mut depth = 0;
                for d in chars.by_ref() {
                    match d {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                out.push_str("{}");
            }
            (Some(_), c) => out.push(c),
            (None, '+' | ' ') => {}
            (None, _) => {
                // A computed operand: one `{}` for the whole of it.
                if !out.ends_with("{}") {
                    out.push_str("{}");
                }
                let mut depth = 0;
                let mut prev = c;
                if c == '(' {
                    depth += 1;
                }
                while let Some(&d) = chars.peek() {
                    if depth == 0 && (d == '+' || d == ' ') && prev != '(' {
                        break;
                    }
                    chars.next();
                    if d == '(' {
                        depth += 1;
                    } else if d == ')' {
                        depth -= 1;
                    }
                    prev = d;
                }
            }
        }
    }
    let path = out.split('?').next().unwrap_or("").to_owned();
    format!("/api/v1{path}")
}

#[test]
fn the_dashboard_calls_only_documented_routes() {
    let calls = dashboard_calls();
    assert!(calls.len() >= 10, "{calls:?}");
    let documented = documented();
    for call in &calls {
        let (method, path) = call.split_once(' ').expect("METHOD path");
        // `{}` in the call may be a parameter or a literal segment.
        let known = documented.iter().any(|d| {
            let (m, p) = d.split_once(' ').expect("METHOD path");
            m == method && {
                let a: Vec<&str> = p.split('/').collect();
                let b: Vec<&str> = path.split('/').collect();
                a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x == y || *y == "{}")
            }
        });
        assert!(
            known,
            "the dashboard calls {call}, which the document does not have"
        );
    }
    // The matcher itself: a made-up route is caught.
    assert!(contract::template_of("/api/v1/processes/p1/nope").is_none());
}
