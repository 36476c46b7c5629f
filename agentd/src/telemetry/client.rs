//! The exporter's HTTP client: the service's own reqwest (opentelemetry-otlp's would bring a
//! second major version of reqwest and hyper into the build).

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError};

/// The most bytes of a collector's answer read (its answer is a small status message).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub(super) struct ReqwestClient(reqwest::Client);

impl ReqwestClient {
    /// A client whose every request ends within `timeout`, answer included.
    pub(super) fn new(timeout: Duration) -> Result<Self, reqwest::Error> {
        reqwest::Client::builder().timeout(timeout).build().map(Self)
    }
}

#[async_trait::async_trait]
impl HttpClient for ReqwestClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let mut answer = self.0.execute(request).await?;
        let mut body = Vec::new();
        while let Some(chunk) = answer.chunk().await? {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err("the collector's answer is too long".into());
            }
            body.extend_from_slice(&chunk);
        }
        let mut response = Response::builder().status(answer.status()).body(Bytes::from(body))?;
        *response.headers_mut() = std::mem::take(answer.headers_mut());
        Ok(response)
    }
}
