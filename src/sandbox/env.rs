//! The environment of a confined run: an allowlist. What every run keeps (where it is, its
//! language, its proxy, the loop's own `LOOP_*` facts), and what its backend declares (its API
//! key, its settings); never the loop's own credentials.

/// What every confined run keeps: a trailing `*` keeps every name with that start.
pub(crate) const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "NO_COLOR",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "LOOP_*",
    // Where the run's own telemetry goes, as the loop's traces do: with the `TRACEPARENT` it
    // is given, an agent's spans join the loop's trace (docs/11-reports-and-traces.md).
    "OTEL_*",
];

/// The names a confined run keeps: [`BASE_ENV`], the toolchains' variables
/// ([`super::toolchains::ENV`]) and its backend's `extra`. (The loop's own
/// credentials are taken out of every run's environment whatever this says.)
#[must_use]
pub(crate) fn kept_env(extra: &[String]) -> Vec<String> {
    let mut out: Vec<String> = BASE_ENV
        .iter()
        .chain(super::toolchains::ENV)
        .map(|s| (*s).to_owned())
        .collect();
    for e in extra {
        if !out.contains(e) {
            out.push(e.clone());
        }
    }
    out
}
