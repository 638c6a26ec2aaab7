//! The params of an `acts.core.http` act (acts-server 0.25's keys) and their
//! JSON Schema, and how they become a request.

use base64::Engine as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

/// The most headers or query params one act may set.
const MAX_PAIRS: usize = 100;

/// How the body is sent and, for the answer, how it is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ContentType {
    /// No body.
    None,
    /// A string, `text/plain`.
    Text,
    /// A string, `text/html`.
    Html,
    /// Any JSON value, `application/json` (the default).
    #[default]
    Json,
    /// Key/value pairs (or an object), `application/x-www-form-urlencoded`.
    Urlencoded,
    /// Key/value pairs (or an object), `multipart/form-data`.
    FormData,
    /// Base64 text sent as bytes, `application/octet-stream`.
    Binary,
    /// Base64 text sent as bytes.
    Image,
    /// Base64 text sent as bytes.
    Video,
    /// Base64 text sent as bytes.
    Audio,
}

/// One `{key, value}` of `headers` or `params` (a value that is not a
/// string is sent as its JSON text).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Pair {
    pub(crate) key: String,
    pub(crate) value: Value,
}

impl Pair {
    fn text(&self) -> String {
        match &self.value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// An act's params.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpParams {
    pub(crate) url: String,
    pub(crate) method: String,
    #[serde(default, rename = "content-type")]
    pub(crate) content_type: ContentType,
    #[serde(default)]
    pub(crate) headers: Vec<Pair>,
    #[serde(default)]
    pub(crate) params: Vec<Pair>,
    #[serde(default)]
    pub(crate) body: Option<Value>,
    #[serde(default, rename = "timeout-ms")]
    pub(crate) timeout_ms: Option<u64>,
}

/// The params' JSON Schema (checked at deploy for literal params and again
/// when the act runs).
pub(crate) fn schema() -> Value {
    let pairs = json!({
        "type": "array",
        "maxItems": MAX_PAIRS,
        "items": {
            "type": "object",
            "required": ["key", "value"],
            "additionalProperties": false,
            "properties": {"key": {"type": "string", "minLength": 1}, "value": {}}
        }
    });
    json!({
        "type": "object",
        "required": ["url", "method"],
        "additionalProperties": false,
        "properties": {
            "url": {"type": "string", "minLength": 1, "maxLength": 8192},
            "method": {"enum": ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]},
            "content-type": {"enum": ["none", "text", "html", "json", "binary", "urlencoded",
                                      "form-data", "image", "video", "audio"]},
            "headers": pairs,
            "params": pairs,
            "body": {},
            "timeout-ms": {"type": "integer", "minimum": 1, "maximum": 3_600_000}
        }
    })
}

/// Headers an act may not set: the client owns the message framing and the
/// host it talks to (a `Host` would point an allowed address at another
/// site it serves).
const RESERVED: [&str; 5] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
];

impl HttpParams {
    /// The method, refused unless it is one of the schema's.
    pub(crate) fn method(&self) -> Result<reqwest::Method, String> {
        match self.method.as_str() {
            "GET" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS" | "HEAD" => {
                reqwest::Method::from_bytes(self.method.as_bytes()).map_err(|e| e.to_string())
            }
            other => Err(format!(
                "method '{other}' is not one of GET, POST, PUT, DELETE, PATCH, OPTIONS, HEAD"
            )),
        }
    }

    /// The act's headers (names checked, reserved ones refused), with
    /// `Idempotency-Key: key` unless the act set its own.
    pub(crate) fn headers(&self, key: &str) -> Result<HeaderMap, String> {
        let mut map = HeaderMap::new();
        map.insert(reqwest::header::ACCEPT, HeaderValue::from_static("*/*"));
        for p in &self.headers {
            let name = HeaderName::from_bytes(p.key.as_bytes())
                .map_err(|_| format!("'{}' is not a header name", p.key))?;
            if RESERVED.contains(&name.as_str()) {
                return Err(format!(
                    "the header '{}' is set by the client, not by a model",
                    p.key
                ));
            }
            let value = HeaderValue::from_str(&p.text())
                .map_err(|_| format!("the value of header '{}' is not a header value", p.key))?;
            map.append(name, value);
        }
        if !map.contains_key("idempotency-key") {
            let v = HeaderValue::from_str(key)
                .map_err(|_| "the idempotency key is not a header value".to_owned())?;
            map.insert(HeaderName::from_static("idempotency-key"), v);
        }
        Ok(map)
    }

    /// The query pairs.
    pub(crate) fn query(&self) -> Vec<(String, String)> {
        self.params
            .iter()
            .map(|p| (p.key.clone(), p.text()))
            .collect()
    }

    /// Adds the body to `req` as `content-type` says.
    pub(crate) fn with_body(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, String> {
        let Some(body) = self.body.as_ref().filter(|b| !b.is_null()) else {
            return Ok(req);
        };
        let mismatch = |want: &str| {
            format!(
                "content-type '{}' needs {want} as the body",
                serde_json::to_value(self.content_type)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{:?}", self.content_type))
            )
        };
        Ok(match self.content_type {
            ContentType::None => return Err("content-type 'none' sends no body".to_owned()),
            ContentType::Json => req.json(body),
            ContentType::Text | ContentType::Html => {
                let text = body.as_str().ok_or_else(|| mismatch("a string"))?;
                let mime = if self.content_type == ContentType::Html {
                    "text/html; charset=utf-8"
                } else {
                    "text/plain; charset=utf-8"
                };
                req.header(reqwest::header::CONTENT_TYPE, mime)
                    .body(text.to_owned())
            }
            ContentType::Urlencoded => {
                let pairs =
                    form_pairs(body).ok_or_else(|| mismatch("{key, value} pairs or an object"))?;
                req.form(&pairs)
            }
            ContentType::FormData => {
                let pairs =
                    form_pairs(body).ok_or_else(|| mismatch("{key, value} pairs or an object"))?;
                let mut form = reqwest::multipart::Form::new();
                for (k, v) in pairs {
                    form = form.text(k, v);
                }
                req.multipart(form)
            }
            ContentType::Binary | ContentType::Image | ContentType::Video | ContentType::Audio => {
                let text = body.as_str().ok_or_else(|| mismatch("base64 text"))?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|e| format!("the body is not base64: {e}"))?;
                req.header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                    .body(bytes)
            }
        })
    }
}

/// `[{key, value}]` or `{key: value}` as text pairs.
fn form_pairs(body: &Value) -> Option<Vec<(String, String)>> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match body {
        Value::Object(m) => Some(m.iter().map(|(k, v)| (k.clone(), text(v))).collect()),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                let p: Pair = serde_json::from_value(i.clone()).ok()?;
                Some((p.key.clone(), p.text()))
            })
            .collect(),
        _ => None,
    }
}

/// How an answer's body becomes the act's `data`, by its `Content-Type`
/// (absent: JSON, as the reference reads it).
pub(crate) fn decode(content_type: Option<&str>, body: &[u8]) -> Result<Option<Value>, String> {
    let mime = content_type
        .unwrap_or("application/json")
        .to_ascii_lowercase();
    let mime = mime.trim();
    if mime.starts_with("application/json") || mime.contains("+json") {
        if body.is_empty() {
            return Ok(None);
        }
        return serde_json::from_slice(body)
            .map(Some)
            .map_err(|e| format!("the answer is not the JSON its content-type says: {e}"));
    }
    if mime.starts_with("text/")
        || mime.starts_with("application/javascript")
        || mime.starts_with("application/xml")
        || mime.starts_with("application/x-www-form-urlencoded")
    {
        return Ok(Some(Value::String(
            String::from_utf8_lossy(body).into_owned(),
        )));
    }
    if body.is_empty() {
        return Ok(None);
    }
    Ok(Some(Value::String(
        base64::engine::general_purpose::STANDARD.encode(body),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> HttpParams {
        serde_json::from_value(v).expect("params")
    }

    #[test]
    fn the_reference_example_params_read() {
        let p = params(json!({
            "url": "http://127.0.0.1:1234/hello", "method": "GET",
            "params": [{"key": "key1", "value": 1}, {"key": "key2", "value": "2"}]
        }));
        assert_eq!(p.content_type, ContentType::Json);
        assert_eq!(
            p.query(),
            vec![("key1".into(), "1".into()), ("key2".into(), "2".into())]
        );
        assert!(
            serde_json::from_value::<HttpParams>(
                json!({"url": "x", "method": "GET", "header": []})
            )
            .is_err()
        );
    }

    #[test]
    fn headers_carry_the_idempotency_key_unless_the_act_sets_one() {
        let p = params(json!({"url": "x", "method": "GET"}));
        assert_eq!(p.headers("k1").expect("headers")["idempotency-key"], "k1");
        let own = params(json!({"url": "x", "method": "GET",
            "headers": [{"key": "Idempotency-Key", "value": "mine"}]}));
        assert_eq!(
            own.headers("k1").expect("headers")["idempotency-key"],
            "mine"
        );
        for bad in ["Host", "content-length", "bad header"] {
            let p = params(json!({"url": "x", "method": "GET",
                "headers": [{"key": bad, "value": "v"}]}));
            assert!(p.headers("k").is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_decode_by_content_type() {
        assert_eq!(
            decode(Some("application/json"), b"{\"a\":1}"),
            Ok(Some(json!({"a": 1})))
        );
        assert_eq!(decode(None, b"[1]"), Ok(Some(json!([1]))));
        assert_eq!(
            decode(Some("text/plain; charset=utf-8"), b"hi"),
            Ok(Some(json!("hi")))
        );
        assert_eq!(
            decode(Some("image/png"), b"\x01\x02"),
            Ok(Some(json!("AQI=")))
        );
        assert!(decode(Some("application/json"), b"not json").is_err());
        assert_eq!(decode(Some("application/json"), b""), Ok(None));
    }
}
