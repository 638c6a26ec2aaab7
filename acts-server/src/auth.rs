//! Who is calling: bearer tokens mapped to principals.
//!
//! Tokens are configured as SHA-256 hashes (`acts token new` makes one and
//! prints its hash), never in clear, so a leaked config file gives nobody
//! access. A request carries `Authorization: Bearer <token>`; the server
//! hashes it and looks the hash up. What a principal may then do is the
//! executor's business (see `acts::Principal`): every handler calls the
//! engine through an executor made for the caller.
//!
//! Without any token configured every request is the local admin — which
//! is why `acts serve` then listens on loopback only.

use std::collections::HashMap;

use acts::Principal;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::extract::Caller;

/// The principal every request is when no token is configured.
pub const LOCAL_ADMIN: &str = "local";

/// One configured token: who it is and the hash of its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The principal's id.
    pub principal: String,
    /// Its roles (`admin`, `operator`, or any role interrupts address).
    #[serde(default)]
    pub roles: Vec<String>,
    /// The token's SHA-256, as 64 hex digits.
    pub sha256: String,
}

/// The configured tokens (none: every request is the local admin).
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: HashMap<[u8; 32], Principal>,
}

impl Auth {
    /// No tokens: every request is the local admin.
    pub fn none() -> Self {
        Self::default()
    }

    /// The tokens of `list`; an entry with an empty principal, a hash that
    /// is not 64 hex digits, or a hash given twice is an error naming it.
    pub fn from_tokens(list: &[TokenConfig]) -> Result<Self, String> {
        let mut tokens = HashMap::new();
        for (i, t) in list.iter().enumerate() {
            let which = format!("token {} (principal '{}')", i + 1, t.principal);
            if t.principal.trim().is_empty() {
                return Err(format!("token {}: the principal is empty", i + 1));
            }
            let hash = parse_hash(&t.sha256).ok_or_else(|| {
                format!(
                    "{which}: sha256 must be 64 hex digits (make one with `acts token new`), got '{}'",
                    t.sha256
                )
            })?;
            let principal = Principal::new(t.principal.clone(), t.roles.clone());
            if tokens.insert(hash, principal).is_some() {
                return Err(format!("{which}: the same token hash is configured twice"));
            }
        }
        Ok(Self { tokens })
    }

    /// Whether any token is configured (requests must then carry one).
    pub fn is_enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The principal of a request with `headers`: the local admin when no
    /// token is configured; else the bearer token's, or a 401.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        if !self.is_enabled() {
            return Ok(Principal::new(LOCAL_ADMIN, [acts::ROLE_ADMIN]));
        }
        let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
            ApiError::unauthorized(
                "this server needs a token: send 'Authorization: Bearer <token>'",
            )
        })?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::unauthorized("the Authorization header must be 'Bearer <token>'")
            })?;
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.tokens
            .get(&digest)
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("the token is not one this server knows"))
    }
}

/// A token's SHA-256 as 64 hex digits (what the config holds).
pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Finds the caller of every request but the health checks, the dashboard
/// and the OpenAPI document (a 401 ends
/// the request there).
pub(crate) async fn authenticate(
    State(auth): State<std::sync::Arc<Auth>>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if path == "/healthz"
        || path == "/readyz"
        || path == crate::openapi::OPENAPI_PATH
        || crate::dashboard::is_asset(path)
    {
        return next.run(req).await;
    }
    match auth.caller(req.headers()) {
        Ok(p) => {
            req.extensions_mut().insert(Caller(p));
            next.run(req).await
        }
        Err(e) => {
            let mut r = e.into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    #[test]
    fn tokens_are_looked_up_by_hash() {
        let auth = Auth::from_tokens(&[TokenConfig {
            principal: "ann".into(),
            roles: vec!["finance".into()],
            sha256: hash_token("s3cret"),
        }])
        .unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(
            auth.caller(&h).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        h.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert_eq!(auth.caller(&h).unwrap().id, "ann");
        h.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert_eq!(
            auth.caller(&h).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        h.insert(header::AUTHORIZATION, "Basic s3cret".parse().unwrap());
        assert_eq!(
            auth.caller(&h).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(Auth::none().caller(&h).unwrap().id, LOCAL_ADMIN);
    }

    #[test]
    fn bad_configs_say_which_entry() {
        let bad = |sha: &str| TokenConfig {
            principal: "ann".into(),
            roles: vec![],
            sha256: sha.into(),
        };
        assert!(
            Auth::from_tokens(&[bad("abc")])
                .unwrap_err()
                .contains("64 hex")
        );
        assert!(Auth::from_tokens(&[bad(&"zz".repeat(32))]).is_err());
        let twice = [bad(&hash_token("x")), bad(&hash_token("x"))];
        assert!(Auth::from_tokens(&twice).unwrap_err().contains("twice"));
        assert_eq!(hash_token("abc").len(), 64);
    }
}
