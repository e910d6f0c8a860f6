//! What the benches that run whole loops share: the loop binary run in a bench's directory
//! (its state, stop file, XDG directory and scenario all inside it), and milliseconds.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

pub const LOOP: &str = env!("CARGO_BIN_EXE_loop");
pub const SIM: &str = env!("CARGO_BIN_EXE_claude-sim");

/// `loop ARGS` on `dir/state/M1.md` with the simulated agent, nothing printed; unconfined
/// (`LOOP_SANDBOX=off`), as the peers it is measured against run, unless the bench says so
/// itself (`loop`'s `sandbox` section).
pub fn loop_cmd(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(LOOP);
    c.args(args)
        .current_dir(dir)
        .env("LOOP_FILE", dir.join("state/M1.md"))
        .env("LOOP_AGENT", SIM)
        .env("LOOP_STOP_FILE", dir.join("stop"))
        .env("XDG_STATE_HOME", dir.join("xdg"))
        .env("CLAUDE_SIM_SCENARIO", dir.join("scenario.json"))
        .env("LOOP_SANDBOX", "off")
        .env_remove("TELEGRAM_BOT_TOKEN")
        // Traces only where a bench sets them (`loop`'s `otel` section).
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
