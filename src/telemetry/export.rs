//! The OTLP exporter, over a blocking `ureq` agent behind `opentelemetry_http::HttpClient`.
//! The SDK's batch processor calls it on its own thread, so blocking there holds nothing of
//! the loop's up, and no async runtime (tokio) or second HTTP stack (reqwest) is built in.

use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{SpanExporter, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::trace::SpanExporter as _;

/// The last request to the collector that failed, and why: the SDK's batch processor drops a
/// batch it could not send without telling its caller, so the exporter keeps it to be said.
pub(super) type Failed = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// The exporter `cfg` asks for, its spans said to be of [`super::config::resource`], and where
/// it keeps why a request failed.
pub(super) fn exporter(cfg: &super::config::Config) -> Result<(SpanExporter, Failed), String> {
    let failed = Failed::default();
    let mut exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(cfg.protocol)
        .with_timeout(cfg.timeout)
        .with_http_client(UreqClient::new(cfg.timeout, failed.clone()))
        .build()
        .map_err(|e| format!("the OTLP exporter cannot be built: {e}"))?;
    exporter.set_resource(&super::config::resource());
    Ok((exporter, failed))
}

/// A `ureq` agent whose every request ends within `timeout`, a collector that accepts the
/// connection and never answers included: its time is lost on the export thread, and only
/// there.
#[derive(Debug)]
struct UreqClient {
    agent: ureq::Agent,
    failed: Failed,
}

impl UreqClient {
    fn new(timeout: Duration, failed: Failed) -> Self {
        let agent = ureq::Agent::config_builder()
            // The exporter reads the status itself (a 429's Retry-After, a partial success).
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .user_agent(concat!("m1loop/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self { agent, failed }
    }
}

#[async_trait::async_trait]
impl HttpClient for UreqClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = Request::from_parts(parts, body.to_vec());
        let uri = request.uri().to_string();
        let (parts, mut body) = match self.agent.run(request) {
            Ok(response) => response.into_parts(),
            Err(e) => {
                if let Ok(mut f) = self.failed.lock() {
                    *f = Some(format!("{uri}: {e}"));
                }
                return Err(e.into());
            }
        };
        let body = body.read_to_vec()?;
        Ok(Response::from_parts(parts, Bytes::from(body)))
    }
}
