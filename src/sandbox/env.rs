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
    // The bundled simulated agent's own settings (its scenario, its log), whichever backend's
    // language it speaks.
    "CLAUDE_SIM_*",
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

/// The files the bundled simulated agent's variables name, with the access it needs: its
/// scenario read, the directory it counts calls in and its logs written. A person trying `loop`
/// with `CLAUDE_SIM_SCENARIO=/somewhere/scenario.json` gets a confined run that can read it, as
/// the run keeps the variable itself. The state directory and the logs are made first, as a
/// CLI's own state is: a bind needs its source. Nothing when the variables are unset.
#[must_use]
pub(crate) fn simulated_agent() -> Vec<(std::path::PathBuf, super::Access)> {
    use std::path::PathBuf;

    use super::Access;
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    let mut out = Vec::new();
    let scenario = var("CLAUDE_SIM_SCENARIO").map(absolute);
    if let Some(s) = &scenario {
        out.push((s.clone(), Access::Read));
    }
    let state = var("CLAUDE_SIM_STATE").map(absolute).or_else(|| {
        scenario.as_ref().map(|s| {
            let mut d = s.clone().into_os_string();
            d.push(".state");
            PathBuf::from(d)
        })
    });
    if let Some(d) = state
        && std::fs::create_dir_all(&d).is_ok()
    {
        out.push((d, Access::Write));
    }
    if let Some(log) = var("CLAUDE_SIM_LOG").map(absolute) {
        let mut hooks = log.clone().into_os_string();
        hooks.push(".hooks.jsonl");
        for f in [log, PathBuf::from(hooks)] {
            let made = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&f);
            if made.is_ok() {
                out.push((f, Access::Write));
            }
        }
    }
    out
}
