//! What the standard `OTEL_*` variables ask of the trace exporter. Tracing is on when an OTLP
//! endpoint is named and nothing turns it off; the exporter itself reads the endpoint and the
//! headers (`OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`, `..._HEADERS`), the SDK the resource
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).

use std::time::Duration;

/// The exporter's settings, once tracing is on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// Each export's time limit (`OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`, milliseconds).
    pub(crate) timeout: Duration,
    pub(crate) batch: Batch,
    /// `OTEL_SERVICE_NAME` or a `service.name` in `OTEL_RESOURCE_ATTRIBUTES` names the service
    /// (otherwise it is `agentd`).
    pub(crate) names_service: bool,
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: prompts and completions in
    /// the spans.
    pub(crate) capture_content: bool,
}

/// The queue and its batches (`OTEL_BSP_*`, milliseconds for times).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Batch {
    /// Spans waiting for export; more are dropped and counted (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub(crate) max_queue: usize,
    /// Spans in one export (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
    pub(crate) max_batch: usize,
    /// The longest a span waits for its batch to fill (`OTEL_BSP_SCHEDULE_DELAY`).
    pub(crate) delay: Duration,
}

/// A variable that asks for something this server cannot do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SettingsError(pub String);

impl From<reqwest::Error> for SettingsError {
    fn from(error: reqwest::Error) -> Self {
        Self(format!("cannot build the OTLP HTTP client: {error}"))
    }
}

/// The bounds of the queue and batch sizes, and of the times.
pub(crate) const MAX_QUEUE: usize = 65_536;
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(60);
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(60);

impl Settings {
    /// `None` when tracing is off: no endpoint named, `OTEL_SDK_DISABLED=true` or
    /// `OTEL_TRACES_EXPORTER=none`. An exporter or protocol other than OTLP over
    /// HTTP/protobuf, or a number out of its bounds, is an error naming the variable.
    pub(crate) fn from_env(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, SettingsError> {
        let set = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match set("OTEL_TRACES_EXPORTER").as_deref() {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(SettingsError(format!(
                    "OTEL_TRACES_EXPORTER={other}: only otlp (or none) is supported"
                )));
            }
        }
        let endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
        if endpoint.is_none() {
            return Ok(None);
        }
        for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(protocol) = set(name) {
                if protocol != "http/protobuf" {
                    return Err(SettingsError(format!(
                        "{name}={protocol}: only http/protobuf is supported"
                    )));
                }
                break;
            }
        }
        let millis = |name: &str, default: u64, max: Duration| -> Result<Duration, SettingsError> {
            let Some(text) = set(name) else { return Ok(Duration::from_millis(default)) };
            match text.parse::<u64>() {
                Ok(ms) if ms > 0 && Duration::from_millis(ms) <= max => {
                    Ok(Duration::from_millis(ms))
                }
                _ => Err(SettingsError(format!(
                    "{name}={text}: a number of milliseconds from 1 to {}",
                    max.as_millis()
                ))),
            }
        };
        let count = |name: &str, default: usize| -> Result<usize, SettingsError> {
            let Some(text) = set(name) else { return Ok(default) };
            match text.parse::<usize>() {
                Ok(n) if (1..=MAX_QUEUE).contains(&n) => Ok(n),
                _ => Err(SettingsError(format!("{name}={text}: a number from 1 to {MAX_QUEUE}"))),
            }
        };
        let timeout = match set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            Some(_) => millis("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10_000, MAX_TIMEOUT)?,
            None => millis("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000, MAX_TIMEOUT)?,
        };
        let max_queue = count("OTEL_BSP_MAX_QUEUE_SIZE", 2048)?;
        let batch = Batch {
            max_queue,
            max_batch: count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)?.min(max_queue),
            delay: millis("OTEL_BSP_SCHEDULE_DELAY", 5000, MAX_DELAY)?,
        };
        let names_service = set("OTEL_SERVICE_NAME").is_some()
            || set("OTEL_RESOURCE_ATTRIBUTES")
                .is_some_and(|a| a.split(',').any(|kv| kv.trim().starts_with("service.name=")));
        Ok(Some(Self { timeout, batch, names_service, capture_content: capture_content(&var) }))
    }
}

/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (read whether or not tracing is
/// on: it only matters when it is).
pub(crate) fn capture_content(var: &impl Fn(&str) -> Option<String>) -> bool {
    var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Option<Settings>, SettingsError> {
        let vars: Vec<(String, String)> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Settings::from_env(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    const ENDPOINT: (&str, &str) = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");

    #[test]
    fn tracing_is_off_without_an_endpoint_or_when_turned_off() {
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(read(&[ENDPOINT, ("OTEL_SDK_DISABLED", "true")]), Ok(None));
        assert_eq!(read(&[ENDPOINT, ("OTEL_TRACES_EXPORTER", "none")]), Ok(None));
        let on = read(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces")]);
        assert!(on.unwrap().is_some());
    }

    #[test]
    fn defaults_are_the_specifications_and_numbers_have_bounds() {
        let settings = read(&[ENDPOINT]).unwrap().unwrap();
        assert_eq!(settings.timeout, Duration::from_secs(10));
        assert_eq!(
            settings.batch,
            Batch { max_queue: 2048, max_batch: 512, delay: Duration::from_secs(5) }
        );
        assert!(!settings.names_service && !settings.capture_content);
        let small = read(&[ENDPOINT, ("OTEL_BSP_MAX_QUEUE_SIZE", "10")]).unwrap().unwrap();
        assert_eq!(small.batch.max_batch, 10, "a batch is never larger than the queue");
        for bad in [
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100000"),
            ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "600000"),
        ] {
            let error = read(&[ENDPOINT, bad]).unwrap_err();
            assert!(error.0.starts_with(bad.0), "{error}");
        }
    }

    #[test]
    fn other_exporters_and_protocols_are_refused_by_name() {
        let grpc = read(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap_err();
        assert!(grpc.0.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"), "{grpc}");
        let zipkin = read(&[ENDPOINT, ("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert!(zipkin.0.contains("OTEL_TRACES_EXPORTER"), "{zipkin}");
        let traces = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf");
        assert!(read(&[ENDPOINT, traces, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).is_ok());
    }

    #[test]
    fn the_service_is_named_by_either_variable_and_content_only_when_asked() {
        let named = read(&[ENDPOINT, ("OTEL_SERVICE_NAME", "agents")]).unwrap().unwrap();
        assert!(named.names_service);
        let attributes =
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod, service.name=a");
        assert!(read(&[ENDPOINT, attributes]).unwrap().unwrap().names_service);
        let content = ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
        assert!(read(&[ENDPOINT, content]).unwrap().unwrap().capture_content);
    }
}
