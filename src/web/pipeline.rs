//! What every request passes through on its way to the router, from the outside in: configured
//! headers (on every response), rate limit (429), request timeout (503), basic auth (401), limit
//! on requests in flight (503 at once).

use super::auth::{BasicAuth, Verdict};
use super::rate_limit::RateLimiter;
use super::WebSettings;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, HeaderName, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{BoxError, Router};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// The router with everything the web config and settings put around it; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct RequestPipeline {
    parts: Arc<PipelineParts>,
}

#[derive(Debug)]
struct PipelineParts {
    router: Router,
    headers: Vec<(HeaderName, HeaderValue)>,
    rate_limiter: Option<RateLimiter>,
    in_flight: Option<InFlightLimit>,
    request_timeout: Option<Duration>,
    basic_auth: Option<BasicAuth>,
}

/// At most `max` requests at once; never a queue, since a scraper that waits in one would time
/// out anyway while holding a connection.
#[derive(Debug)]
struct InFlightLimit {
    max: usize,
    permits: Arc<Semaphore>,
}

impl RequestPipeline {
    pub(crate) fn new(router: Router, settings: &WebSettings) -> Self {
        let config = settings.config.as_ref();
        let max = settings.max_requests.min(Semaphore::MAX_PERMITS);
        let parts = PipelineParts {
            router,
            headers: config.map(|config| config.headers().to_vec()).unwrap_or_default(),
            rate_limiter: config.and_then(|config| config.rate_limit()).map(RateLimiter::new),
            in_flight: (max > 0).then(|| InFlightLimit { max, permits: Arc::new(Semaphore::new(max)) }),
            request_timeout: (!settings.request_timeout.is_zero()).then_some(settings.request_timeout),
            basic_auth: config.and_then(|config| BasicAuth::new(config.users())),
        };
        RequestPipeline { parts: Arc::new(parts) }
    }

    /// Answers one request; every response, refusals included, carries the configured headers.
    pub(crate) async fn handle<B>(&self, request: Request<B>) -> Response
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let mut response = self.admitted(request).await;
        for (name, value) in &self.parts.headers {
            response.headers_mut().insert(name.clone(), value.clone());
        }
        response
    }

    async fn admitted<B>(&self, request: Request<B>) -> Response
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        if self.parts.rate_limiter.as_ref().is_some_and(|limiter| !limiter.allow()) {
            return (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response();
        }
        // The timeout covers the wait for a bcrypt check too, so guessers cannot pile up forever.
        match self.parts.request_timeout {
            Some(limit) => tokio::time::timeout(limit, self.authenticated(request)).await.unwrap_or_else(|_| {
                (StatusCode::SERVICE_UNAVAILABLE, "The request took too long and was cancelled.\n").into_response()
            }),
            None => self.authenticated(request).await,
        }
    }

    /// Basic auth comes before the limit on requests in flight: requests with wrong credentials,
    /// slowed down by bcrypt, then never take the places of the scrapes with right ones.
    async fn authenticated<B>(&self, request: Request<B>) -> Response
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        if let Some(auth) = &self.parts.basic_auth {
            match auth.allows(request.headers()).await {
                Verdict::Allowed => {}
                Verdict::Refused => return unauthorized(),
                Verdict::Busy => {
                    let text = "Too many login checks at once, try again later.\n";
                    return (StatusCode::TOO_MANY_REQUESTS, text).into_response();
                }
            }
        }
        self.within_in_flight_limit(request).await
    }

    async fn within_in_flight_limit<B>(&self, request: Request<B>) -> Response
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        // Held until the router has produced the response; this exporter's responses are
        // rendered whole before they are sent, so that is when the work is done.
        let _permit = match self.in_flight_permit() {
            Ok(permit) => permit,
            Err(max) => {
                let text = format!("Limit of concurrent requests reached ({max}), try again later.\n");
                return (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
            }
        };
        match self.parts.router.clone().oneshot(request.map(Body::new)).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// A permit when the limit allows one more request (or there is no limit); else the limit.
    fn in_flight_permit(&self) -> Result<Option<OwnedSemaphorePermit>, usize> {
        let Some(limit) = &self.parts.in_flight else { return Ok(None) };
        limit.permits.clone().try_acquire_owned().map(Some).map_err(|_| limit.max)
    }
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Basic")], "Unauthorized\n").into_response()
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
