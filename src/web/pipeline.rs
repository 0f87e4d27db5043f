//! What every request passes through on its way to the routes, as tower layers, from the outside
//! in: configured headers (on every response, refusals included), rate limit (429), request
//! timeout (503), basic auth (401). (The limit on scrapes at once is the metrics route's own.)
//!
//! tower-http provides the headers and the timeout. The rate limit and basic auth are this
//! exporter's own middleware: exporter-toolkit's rate limit refuses with 429 where tower's waits,
//! and basic auth checks bcrypt hashes as exporter-toolkit's web configuration gives them.

use super::auth::{BasicAuth, Verdict};
use super::rate_limit::RateLimiter;
use super::WebSettings;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::sync::Arc;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;

/// `router` with everything the web config and settings put around it, and the basic auth among
/// them (that of the stack `before` when its users are the same; see [`BasicAuth::for_users`]),
/// to close at shutdown (see [`BasicAuth::close`]). Each `layer` call wraps what came before, so
/// the layers are added from the inside out.
pub(crate) fn wrap(
    mut router: Router,
    settings: &WebSettings,
    before: Option<&Arc<BasicAuth>>,
) -> (Router, Option<Arc<BasicAuth>>) {
    let config = settings.config.as_ref();
    // Basic auth comes inside the timeout, which bounds the wait for a bcrypt check, and outside
    // the routes' scrape limit, so that guesses slowed down by bcrypt never take scrapes' places.
    let auth = config.and_then(|config| BasicAuth::for_users(&config.users, before));
    if let Some(auth) = &auth {
        router = router.layer(middleware::from_fn_with_state(auth.clone(), check_credentials));
    }
    router = router.layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, settings.request_timeout));
    if let Some(limiter) = config.and_then(|config| config.rate_limit).map(RateLimiter::new) {
        router = router.layer(middleware::from_fn_with_state(Arc::new(limiter), rate_limited));
    }
    for (name, value) in config.map(|config| config.headers.as_slice()).unwrap_or_default() {
        router = router.layer(SetResponseHeaderLayer::overriding(name.clone(), value.clone()));
    }
    (router, auth)
}

async fn rate_limited(State(limiter): State<Arc<RateLimiter>>, request: Request, next: Next) -> Response {
    if !limiter.allow() {
        return (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response();
    }
    next.run(request).await
}

async fn check_credentials(State(auth): State<Arc<BasicAuth>>, request: Request<Body>, next: Next) -> Response {
    match auth.allows(request.headers()).await {
        Verdict::Allowed => next.run(request).await,
        Verdict::Refused => {
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Basic")], "Unauthorized\n").into_response()
        }
        Verdict::Busy => {
            (StatusCode::TOO_MANY_REQUESTS, "Too many login checks at once, try again later.\n").into_response()
        }
        Verdict::Closing => (StatusCode::SERVICE_UNAVAILABLE, "The exporter is stopping.\n").into_response(),
    }
}

#[cfg(test)]
mod tests;
