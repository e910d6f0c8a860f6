//! `claude-sim`: the simulated Claude Code that `loop demo` and the tests run instead of the
//! real CLI. Set `LOOP_AGENT=claude-sim` (or its path) to drive a loop with it.
//!
//! Environment: `CLAUDE_SIM_SCENARIO` (a JSON scenario; absent: every call succeeds),
//! `CLAUDE_SIM_STATE` (where the call counts live, one directory per loop; default
//! `<scenario>.state/`), `CLAUDE_SIM_LOG` (one JSON line per call, written as it starts). The
//! scenario format is documented in crates/claude-sim/README.md.

fn main() -> std::process::ExitCode {
    let code = claude_sim::main();
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
