//! `loop demo`: a whole loop with the bundled simulated agent in a temporary directory, so a
//! newcomer sees it work with no Claude account. Three steps, each reviewed; the second one's
//! first attempt claims success without producing its file, VERIFY catches it, the retry
//! fixes it, and the review asks for a change before it approves.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::error::Error;
use crate::exit::Status;
use crate::runner::settings::Overrides;
use crate::runner::{RunOptions, StartRequest, start};

const SCENARIO: &str = r#"{
  "steps": {
    "1": [{"sleep_ms": 400, "heartbeat_ms": 150, "write": [{"path": "step1.txt", "text": "findings\n"}],
           "result": "Looked at the code and wrote step1.txt.\nSTEP_DONE: investigation written to step1.txt"},
          {"sleep_ms": 300, "result": "The findings are there.\nREVIEW_APPROVE: step1.txt holds the investigation"}],
    "2": [{"sleep_ms": 400, "heartbeat_ms": 150,
           "result": "I think the fix is in place.\nSTEP_DONE: fix applied"},
          {"sleep_ms": 400, "heartbeat_ms": 150, "write": [{"path": "step2.txt", "text": "fixed\n"}],
           "result": "The file was missing; wrote step2.txt.\nSTEP_DONE: fix written to step2.txt"},
          {"sleep_ms": 300,
           "result": "step2.txt says only 'fixed'.\nREVIEW_CHANGES: step2.txt must say what was fixed and how"},
          {"sleep_ms": 400, "heartbeat_ms": 150,
           "write": [{"path": "step2.txt", "text": "fixed: SIGTERM now stops the child before exit\n"}],
           "result": "Said what was fixed.\nSTEP_DONE: step2.txt explains the fix"},
          {"sleep_ms": 300, "result": "Clear now.\nREVIEW_APPROVE: step2.txt explains the fix"}],
    "3": [{"sleep_ms": 400, "heartbeat_ms": 150, "write": [{"path": "step3.txt", "text": "tested\n"}],
           "result": "Ran the checks.\nSTEP_DONE: tests pass, step3.txt written"},
          {"sleep_ms": 300, "result": "The test record is there.\nREVIEW_APPROVE: step3.txt records the run"}]
  }
}
"#;

/// The file name of the simulated agent's binary.
pub(crate) const SIM_BINARY: &str = "claude-sim";

/// Where `claude-sim` is: beside the running executable (`loop demo`), or one level up (a test
/// binary in `target/*/deps/`). `None` when it was not built.
#[must_use]
pub fn locate_sim() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(SIM_BINARY))
        .find(|p| p.is_file())
}

/// The simulated agent, built beside the `loop` binary.
fn sim_agent() -> crate::error::Result<PathBuf> {
    locate_sim().ok_or_else(|| {
        Error::bad_input(format!(
            "the simulated agent `{SIM_BINARY}` is not beside the loop binary; build both with \
             `cargo build --release` (it is part of this package; `cargo run` alone builds only \
             `loop`)"
        ))
    })
}

/// `loop demo`: the loop's M1.md in its own temporary directory, or at `file` (`--file` on the
/// command line; an exported `LOOP_FILE` is never the demo's, so that it cannot archive and
/// replace a person's own loop).
///
/// # Errors
/// When the simulated agent is missing or the temporary directory cannot be made; what
/// `start` refuses (nothing is left behind then).
pub(crate) fn demo(file: Option<&Path>, opts: &RunOptions) -> crate::error::Result<Status> {
    let sim = sim_agent()?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    // A directory of its own in the shared temporary directory: nothing another user put at a
    // name there is written through.
    let dir = crate::dirs::private_temp_dir(&format!("loop-demo-{stamp}")).with_context(|| {
        format!(
            "while creating the demo's directory in {}",
            std::env::temp_dir().display()
        )
    })?;
    std::fs::create_dir_all(dir.join("state"))
        .with_context(|| format!("while creating {}", dir.join("state").display()))?;
    let scenario = dir.join("scenario.json");
    std::fs::write(&scenario, SCENARIO)?;
    // `--file` puts the demo's M1.md (and so its state directory) where a person asked; the
    // project the simulated agent works in stays the temporary directory.
    let file = file.map_or_else(|| dir.join("state").join("M1.md"), Path::to_path_buf);
    crate::outln!(
        "loop demo: a 3-step loop with the simulated agent in {}",
        dir.display()
    );
    crate::outln!(
        "(Ctrl-C stops it; `loop resume --file {}` carries it on)",
        file.display()
    );
    // The simulated agent runs no command of anyone's: it writes the demo's step files and
    // answers from its scenario, so the demo needs no sandbox, and runs where bubblewrap is
    // not installed. A loop of your own is confined unless you say otherwise.
    crate::outln!(
        "(unconfined: the simulated agent runs no command, it only writes the demo's files; \
         a loop of your own runs its agent in a sandbox, see `loop start --help`)\n"
    );
    let req = StartRequest {
        goal: "Demo: investigate, fix and test a (simulated) bug".into(),
        steps: vec![
            "Investigate the bug → step1.txt".into(),
            "Implement the fix → step2.txt".into(),
            "Test the fix → step3.txt".into(),
        ],
        constraints: Some("touch only files in the demo directory".into()),
        overrides: Overrides {
            verify: Some("test -f step$LOOP_STEP.txt".into()),
            review: true,
            agent_program: Some(sim.display().to_string()),
            sandbox: Some(crate::m1::SandboxMode::Off),
            agent_env: vec![
                ("CLAUDE_SIM_SCENARIO".into(), scenario.display().to_string()),
                (
                    "CLAUDE_SIM_LOG".into(),
                    dir.join("sim-calls.jsonl").display().to_string(),
                ),
            ],
            ..Overrides::default()
        },
        workdir: Some(dir.clone()),
        ..StartRequest::default()
    };
    // `start` checks everything before it writes anything: when it refuses (a RUNNING loop at
    // --file, a stop file), the M1.md there is as it was, and the demo takes its directory
    // away again instead of leaving an empty project in the temporary directory.
    let before = std::fs::read(&file).ok();
    let status = match start(&file, &req, opts) {
        Ok(status) => status,
        Err(e) => {
            if std::fs::read(&file).ok() == before {
                let _ = std::fs::remove_dir_all(&dir);
            }
            return Err(e);
        }
    };
    crate::outln!(
        "\nloop demo: finished with exit status {} — its M1.md:",
        status.code()
    );
    crate::outln!("{}", file.display());
    Ok(status)
}
