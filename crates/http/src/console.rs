//! The web console: one page (`/console`; `/` redirects to it) showing the databases and
//! collections, each time-series collection's options and bucket statistics, and a
//! series browser whose chart the server downsamples (an `aggregate` grouping by
//! `$dateTrunc`). The page, its script and the vendored uPlot (MIT, from npm) are
//! compiled into the binary: nothing is built or fetched at run time. Its data comes from
//! [`console_api`](crate::console_api).
//!
//! The API refuses (403) a request whose `Origin` is not the page's own, and, with access
//! control off, one whose `Host` is a DNS name other than `localhost`: an anonymous
//! loopback listener must not answer a page that reached it by DNS rebinding.

use crate::console_api;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hourglass_protocol::{CommandError, ServerState};
use std::net::IpAddr;
use std::sync::Arc;

/// A static file of the console.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

const ASSETS: &[Asset] = &[
    Asset {
        path: "/console",
        content_type: HTML,
        body: include_bytes!("../console/index.html"),
    },
    Asset {
        path: "/console/console.js",
        content_type: JS,
        body: include_bytes!("../console/console.js"),
    },
    Asset {
        path: "/console/console.css",
        content_type: CSS,
        body: include_bytes!("../console/console.css"),
    },
    Asset {
        path: "/console/vendor/uPlot.iife.min.js",
        content_type: JS,
        body: include_bytes!("../console/vendor/uPlot.iife.min.js"),
    },
    Asset {
        path: "/console/vendor/uPlot.min.css",
        content_type: CSS,
        body: include_bytes!("../console/vendor/uPlot.min.css"),
    },
    Asset {
        path: "/console/vendor/uPlot.LICENSE",
        content_type: TEXT,
        body: include_bytes!("../console/vendor/uPlot.LICENSE"),
    },
];

/// The page loads only its own files; uPlot sets inline styles.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
                   base-uri 'none'; form-action 'self'";

/// The console's routes (the caller adds authentication).
pub fn routes(state: Arc<ServerState>) -> Router<Arc<ServerState>> {
    let api = Router::new()
        .route("/console/api/command", post(console_api::command))
        .route("/console/api/summary", get(console_api::summary))
        .layer(axum::middleware::from_fn_with_state(state, guard));
    let mut router = Router::new()
        .route("/", get(|| async { Redirect::to("/console") }))
        .route("/console/", get(|| async { Redirect::to("/console") }));
    for asset in ASSETS {
        router = router.route(asset.path, get(move || async move { serve(asset) }));
    }
    router.merge(api)
}

fn serve(asset: &'static Asset) -> Response {
    let mut resp = (
        [
            (header::CONTENT_TYPE, asset.content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        asset.body,
    )
        .into_response();
    if asset.content_type == HTML {
        resp.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        resp.headers_mut()
            .insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    resp
}

/// Refuses API requests from another origin, or (access control off) addressed to a DNS
/// name other than `localhost`.
async fn guard(State(state): State<Arc<ServerState>>, req: Request, next: Next) -> Response {
    if let Err(message) = check_origin(req.headers(), state.access.enabled()) {
        return (
            StatusCode::FORBIDDEN,
            Json(
                bson::Bson::Document(CommandError::new(13, message).to_reply())
                    .into_relaxed_extjson(),
            ),
        )
            .into_response();
    }
    next.run(req).await
}

fn check_origin(headers: &HeaderMap, access_control: bool) -> Result<(), String> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !access_control && !local_host(host) {
        return Err(format!(
            "without access control the console answers only requests addressed to \
             localhost or an IP address, not to '{host}'"
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if authority.is_none_or(|a| !a.eq_ignore_ascii_case(host)) {
            return Err(format!(
                "the console API answers only its own page, not a request from origin '{origin}'"
            ));
        }
    }
    Ok(())
}

/// Whether `host` (a `Host` header: name or address, with an optional port) is
/// `localhost` or an IP address, which DNS rebinding cannot produce.
fn local_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((addr, _)) => return addr.parse::<std::net::Ipv6Addr>().is_ok(),
            None => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).expect("header"));
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).expect("header"));
        }
        h
    }

    #[test]
    fn hosts_and_origins() {
        for host in [
            "127.0.0.1:8080",
            "localhost:1",
            "[::1]:80",
            "10.0.0.1",
            "LOCALHOST",
        ] {
            assert!(check_origin(&headers(host, None), false).is_ok(), "{host}");
        }
        for host in ["evil.example:8080", "evil.example", "[nonsense]:1", ""] {
            assert!(check_origin(&headers(host, None), false).is_err(), "{host}");
        }
        // With access control, any name (the request carries credentials).
        assert!(check_origin(&headers("db.example:8080", None), true).is_ok());
        let same = headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"));
        assert!(check_origin(&same, false).is_ok());
        for origin in ["http://evil.example", "null", "http://127.0.0.1:9999"] {
            let h = headers("127.0.0.1:8080", Some(origin));
            assert!(check_origin(&h, false).is_err(), "{origin}");
        }
    }

    #[test]
    fn every_asset_is_embedded() {
        for a in ASSETS {
            assert!(!a.body.is_empty(), "{}", a.path);
        }
        let page = std::str::from_utf8(ASSETS[0].body).expect("utf-8");
        assert!(page.contains("/console/vendor/uPlot.iife.min.js"));
    }
}
