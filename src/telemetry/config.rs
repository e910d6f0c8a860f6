//! What the standard `OTEL_*` variables ask of the exporter. The endpoint, headers and
//! compression the OTLP exporter reads itself; the protocol and the timeout are read here,
//! because the loop's defaults differ from the exporter's: `http/protobuf` (the exporter
//! would take JSON, having both), and 2 s rather than 10, for the timeout also bounds how long
//! a runner's end waits on a collector that does not answer.

use std::time::Duration;

use opentelemetry_otlp::Protocol;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchConfig, BatchConfigBuilder};

/// The timeout of one export, and the most a runner's end waits for its last spans.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a span waits on the export thread before it is sent, unless
/// `OTEL_BSP_SCHEDULE_DELAY` says: shorter than the SDK's 5 s, so that a runner killed `-9`
/// takes with it at most the spans of its last half second.
const SCHEDULE_DELAY: Duration = Duration::from_millis(500);

/// The batch processor's settings: the `OTEL_BSP_*` variables, and [`SCHEDULE_DELAY`].
pub(super) fn batch() -> BatchConfig {
    let builder = BatchConfigBuilder::default();
    if first_set(&["OTEL_BSP_SCHEDULE_DELAY"]).is_some() {
        builder.build()
    } else {
        builder.with_scheduled_delay(SCHEDULE_DELAY).build()
    }
}

/// How the exporter is set up.
#[derive(Debug, Clone)]
pub(super) struct Config {
    pub protocol: Protocol,
    pub timeout: Duration,
}

/// The first of `names` that is set to something, trimmed.
fn first_set(names: &[&str]) -> Option<(String, String)> {
    names.iter().find_map(|n| {
        let v = std::env::var(n).ok()?;
        let v = v.trim();
        (!v.is_empty()).then(|| ((*n).to_owned(), v.to_owned()))
    })
}

impl Config {
    /// `None` when traces are not asked for: no endpoint, or the SDK or the traces exporter
    /// turned off (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`).
    pub(super) fn from_env() -> Option<Result<Self, String>> {
        first_set(&[
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ])?;
        if first_set(&["OTEL_SDK_DISABLED"]).is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"))
            || first_set(&["OTEL_TRACES_EXPORTER"])
                .is_some_and(|(_, v)| v.eq_ignore_ascii_case("none"))
        {
            return None;
        }
        Some(Self::read())
    }

    fn read() -> Result<Self, String> {
        let protocol = match first_set(&[
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]) {
            None => Protocol::HttpBinary,
            Some((_, v)) if v.eq_ignore_ascii_case("http/protobuf") => Protocol::HttpBinary,
            Some((_, v)) if v.eq_ignore_ascii_case("http/json") => Protocol::HttpJson,
            Some((name, v)) => {
                return Err(format!(
                    "{name}={v}: loop sends traces over http/protobuf or http/json only"
                ));
            }
        };
        let timeout = match first_set(&[
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]) {
            None => DEFAULT_TIMEOUT,
            Some((name, v)) => match v.parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms),
                Err(_) => {
                    return Err(format!("{name}={v}: not a number of milliseconds"));
                }
            },
        };
        Ok(Self { protocol, timeout })
    }

    #[cfg(test)]
    pub(super) fn for_test() -> Self {
        Self {
            protocol: Protocol::HttpBinary,
            timeout: Duration::from_millis(200),
        }
    }
}

/// What the spans are of: `service.name` `m1loop` unless `OTEL_SERVICE_NAME` or
/// `OTEL_RESOURCE_ATTRIBUTES` names it, and what those add.
pub(super) fn resource() -> Resource {
    let named = first_set(&["OTEL_SERVICE_NAME"]).is_some()
        || first_set(&["OTEL_RESOURCE_ATTRIBUTES"]).is_some_and(|(_, v)| {
            v.split(',')
                .any(|kv| kv.trim().starts_with("service.name="))
        });
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name("m1loop").build()
    }
}
