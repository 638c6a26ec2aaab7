//! The web dashboard: a single page (HTML, CSS and JavaScript written by
//! hand, no build step) embedded in the binary and served at `/`, talking
//! to the same `/api/v1` as every other client with the signed-in token.
//! Its assets hold no data, so they are served without a token; a strict
//! Content-Security-Policy allows only the server's own scripts and
//! styles, and the page builds every element from text (never from HTML
//! it was sent), so a process's data cannot inject markup.

use crate::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;

const INDEX: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const APP_CSS: &str = include_str!("../ui/app.css");
const BULK_JS: &str = include_str!("../ui/bulk.js");

/// The policy every dashboard response carries.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; form-action 'none'; \
                   frame-ancestors 'none'; base-uri 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// The page and its assets; they work with any router state.
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> OpenApiRouter<S> {
    OpenApiRouter::new()
        .routes(routes!(index))
        .routes(routes!(file))
}

/// The dashboard (no token needed: it signs in in the browser).
#[utoipa::path(
    get, path = "/", tag = "dashboard", security(()),
    responses((status = 200, description = "The page.", content_type = "text/html", body = String))
)]
async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// The dashboard's script and style (no token needed).
#[utoipa::path(
    get, path = "/ui/{file}", tag = "dashboard", security(()),
    params(("file" = String, Path, description = "`app.js`, `bulk.js` or `app.css`.", example = "app.js")),
    responses(
        (status = 200, description = "The file.", content_type = "text/javascript", body = String),
        (status = 404, description = "No such file.", body = crate::error::ErrorBody)
    )
)]
async fn file(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "app.js" => asset("text/javascript; charset=utf-8", APP_JS),
        "bulk.js" => asset("text/javascript; charset=utf-8", BULK_JS),
        "app.css" => asset("text/css; charset=utf-8", APP_CSS),
        _ => ApiError::not_found(format!("no dashboard file '{file}'")).into_response(),
    }
}

/// Whether `path` is one of the dashboard's assets (served without a
/// token: they hold no data).
pub(crate) fn is_asset(path: &str) -> bool {
    path == "/" || path.starts_with("/ui/")
}
