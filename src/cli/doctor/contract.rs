//! `loop doctor`'s contract run: the agent CLI called exactly as the loop calls it (its
//! flags, its hooks' settings, its prompt on standard input), against the loopback
//! [`super::mock`], in a scratch directory with a scratch home: no account, no network, none
//! of the person's sessions touched. Then the same session resumed. What the loop relies on
//! is checked in what the CLI printed.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::agent::{AgentConfig, Session, StreamReader, StreamSummary};
use crate::m1::settings::AgentKind;

/// How long one contract call may take (a CLI's first start can be slow).
const WITHIN: Duration = Duration::from_secs(120);

/// What the contract run found.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// What held, for the table.
    pub held: Vec<String>,
    /// What did not.
    pub failures: Vec<String>,
    /// The first call ran to a clean answer: every flag it was given was accepted.
    pub accepted: bool,
    /// What the CLI said when it did not (stderr, its errors).
    pub said: String,
}

/// Waits for `child` to end (killing it after `within`) and collects its output.
///
/// # Errors
/// It did not end in time, or could not be waited for.
pub(super) fn wait_output(child: &mut Child, within: Duration) -> Result<Output, String> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < within => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("did not end within {}s", within.as_secs()));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    let mut out = Output {
        status: child.wait().map_err(|e| e.to_string())?,
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_end(&mut out.stdout);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_end(&mut out.stderr);
    }
    Ok(out)
}

/// A scratch directory, removed when dropped.
pub(super) struct Scratch(pub PathBuf);

impl Scratch {
    /// A new one of this user's alone, named for `what`, in the machine's temporary
    /// directory ([`crate::dirs::private_temp_dir`]).
    pub(super) fn new(what: &str) -> std::io::Result<Self> {
        crate::dirs::private_temp_dir(&format!("loop-doctor-{what}")).map(Self)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One call's output, read.
struct Call {
    stream: StreamSummary,
    said: String,
    ok: bool,
}

/// How the loop's runs are confined here: bubblewrap, and the person's paths
/// (`SandboxSettings::paths`) with their access.
pub(super) struct Confined<'a> {
    pub bwrap: &'a Path,
    pub paths: Vec<(std::path::PathBuf, crate::sandbox::Access)>,
    /// The variables the person added (`SANDBOX_ENV`).
    pub env: Vec<String>,
}

/// Runs the contract of `kind` with `program`, called as `cfg` says, confined as `confined`
/// says (`None`: the loop's sandbox is off).
pub(super) fn run(
    kind: AgentKind,
    cfg: &AgentConfig,
    program: &Path,
    confined: Option<&Confined<'_>>,
) -> Outcome {
    let mut o = Outcome::default();
    let scratch = match Scratch::new("contract") {
        Ok(s) => s,
        Err(e) => {
            o.failures.push(format!(
                "cannot make a scratch directory in {}: {e}",
                std::env::temp_dir().display()
            ));
            return o;
        }
    };
    let (work, home) = (scratch.0.join("work"), scratch.0.join("home"));
    if let Err(e) = std::fs::create_dir_all(&work).and_then(|()| std::fs::create_dir_all(&home)) {
        o.failures
            .push(format!("cannot make a scratch directory: {e}"));
        return o;
    }
    let mock = match super::mock::Mock::start() {
        Ok(m) => m,
        Err(e) => {
            o.failures.push(format!("cannot listen on loopback: {e}"));
            return o;
        }
    };
    let cfg = AgentConfig {
        program: program.display().to_string(),
        ..cfg.clone()
    };
    let setup = Setup {
        kind,
        cfg: &cfg,
        scratch: &scratch.0,
        work: &work,
        home: &home,
        port: mock.port(),
        confined,
    };
    let first = match setup.call(
        &Session::New(crate::agent::new_session_id()),
        "Say you checked it.",
    ) {
        Ok(c) => c,
        Err(e) => {
            o.failures.push(e);
            return o;
        }
    };
    o.accepted = first.ok;
    if confined.is_some() && first.ok {
        o.held.push("inside the sandbox".into());
    }
    o.said.clone_from(&first.said);
    check_first(kind, &setup, &first, &mut o);
    if let Some(id) = first.stream.session_id.clone().filter(|_| first.ok) {
        match setup.call(&Session::Resume(id.clone()), "Say it again.") {
            Ok(again) if again.ok && again.stream.session_id.as_deref() == Some(id.as_str()) => {
                o.held.push("a resume kept the session".into());
            }
            Ok(again) => o.failures.push(format!(
                "the resume of session {id} did not answer in it: {}",
                crate::text::one_line(&again.said, 200)
            )),
            Err(e) => o.failures.push(format!("the resume: {e}")),
        }
    }
    o
}

/// What the first call must show.
fn check_first(kind: AgentKind, setup: &Setup<'_>, first: &Call, o: &mut Outcome) {
    let s = &first.stream;
    if !first.ok {
        // A program that cannot start in the sandbox is a set-up to change, said as such.
        let refused = setup.confined.and_then(|sandbox| {
            let exe = std::env::current_exe().ok()?;
            let probe = std::process::Command::new(&setup.cfg.program);
            let cmd = setup.confined(&probe, sandbox, &exe);
            let mut argv = vec![cmd.get_program().to_string_lossy().into_owned()];
            argv.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
            crate::sandbox::refusal(&first.said, &argv, &crate::runner::confine::home())
        });
        o.failures.push(match refused {
            Some(r) => format!(
                "the agent program cannot start in the sandbox: {}",
                r.said()
            ),
            None => format!(
                "the call the loop makes did not answer: {}",
                crate::text::one_line(&first.said, 300)
            ),
        });
        return;
    }
    let mut need = |ok: bool, held: &str, missing: &str| {
        if ok {
            o.held.push(held.to_owned());
        } else {
            o.failures.push(missing.to_owned());
        }
    };
    need(
        s.session_id.is_some(),
        "the session id in the stream",
        "no session id in the stream (the loop resumes by it)",
    );
    let verdict = s
        .result
        .as_ref()
        .and_then(|r| r.result.as_deref())
        .is_some_and(|t| t.contains("STEP_DONE:"));
    need(
        verdict,
        "the answer's verdict line in the final event",
        "the final event does not carry the answer's last line (the loop judges by it)",
    );
    let hook_fired = setup.scratch.join("hook-fired").exists();
    for c in crate::agent::backend_for(kind).contract_checks(s, hook_fired) {
        need(c.holds, c.held, c.missing);
    }
}

impl Setup<'_> {
    /// `cmd` as the loop's sandbox runs it: the scratch project its work tree, the scratch
    /// home empty but for the backend's own state, the scratch directory (settings, prompt,
    /// the hook's mark) read and written as a run's task directory is, the environment the
    /// allowlist.
    fn confined(
        &self,
        cmd: &std::process::Command,
        sandbox: &Confined<'_>,
        exe: &Path,
    ) -> std::process::Command {
        let backend = crate::agent::backend_for(self.kind);
        let mode = backend.mode(&|k| std::env::var(k).ok());
        let program = std::path::PathBuf::from(cmd.get_program());
        let policy = crate::sandbox::Policy {
            work_tree: self.work.to_path_buf(),
            work_tree_writable: true,
            state_dir: self.scratch.to_path_buf(),
            state_writes: vec![self.scratch.to_path_buf()],
            home: self.home.to_path_buf(),
            paths: (crate::sandbox::own_state(backend.own_state(self.home)).into_iter())
                .chain(sandbox.paths.iter().cloned())
                .chain(crate::sandbox::toolchains::of_person(self.home))
                .collect(),
            programs: crate::sandbox::toolchains::with_interpreters(vec![
                program,
                exe.to_path_buf(),
            ]),
            env: crate::sandbox::kept_env(
                &(backend.own_env().iter().map(|s| (*s).to_owned()))
                    .chain(
                        mode.iter()
                            .flat_map(|m| m.env.iter().map(|s| (*s).to_owned())),
                    )
                    .chain(sandbox.env.iter().cloned())
                    .collect::<Vec<_>>(),
            ),
            named_files: mode.map(|m| m.files).unwrap_or_default(),
        };
        let mut command = vec![cmd.get_program().to_string_lossy().into_owned()];
        command.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
        let (mut out, _) = sandboxed(sandbox.bwrap, &policy, &command);
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => out.env(k, v),
                None => out.env_remove(k),
            };
        }
        out
    }
}

/// Where and how the contract calls run.
struct Setup<'a> {
    kind: AgentKind,
    cfg: &'a AgentConfig,
    scratch: &'a Path,
    work: &'a Path,
    home: &'a Path,
    port: u16,
    /// How the loop's runs are confined, when they are: the calls are too.
    confined: Option<&'a Confined<'a>>,
}

impl Setup<'_> {
    /// One call in `session` with `prompt`, as the loop makes it.
    fn call(&self, session: &Session, prompt: &str) -> Result<Call, String> {
        let backend = crate::agent::backend_for(self.kind);
        let cfg = crate::agent::AgentConfig {
            confined: self.confined.is_some(),
            files_dir: Some(self.scratch.to_path_buf()),
            ..self.cfg.clone()
        };
        let inv = backend
            .invocation(&cfg, prompt, session)
            .map_err(|r| format!("the loop's settings are refused: {r}"))?;
        let settings = self.scratch.join("settings.json");
        let hook = serde_json::json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command",
            "command": format!("touch {}", crate::text::shell_word(
                &self.scratch.join("hook-fired").display().to_string()))}]}]}});
        std::fs::write(&settings, hook.to_string()).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let inv = backend.with_hooks(inv, &settings.display().to_string(), &exe);
        let input = self.scratch.join("prompt.txt");
        std::fs::write(&input, &inv.input).map_err(|e| e.to_string())?;
        inv.write_files().map_err(|e| e.to_string())?;
        let mut cmd = inv.command();
        // As every agent run the loop starts: none of the loop's own credentials.
        for k in crate::notifier::CREDENTIALS {
            cmd.env_remove(k);
        }
        cmd.current_dir(self.work)
            .env("HOME", self.home)
            .stdin(std::fs::File::open(&input).map_err(|e| e.to_string())?)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.point_at_the_mock(&mut cmd)?;
        let mut cmd = match self.confined {
            Some(sandbox) => {
                let mut confined = self.confined(&cmd, sandbox, &exe);
                confined
                    .current_dir(self.work)
                    .stdin(std::fs::File::open(&input).map_err(|e| e.to_string())?)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                confined
            }
            None => cmd,
        };
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.cfg.program))?;
        let out = wait_output(&mut child, WITHIN)?;
        let mut reader = StreamReader::of(self.kind);
        reader.feed(&out.stdout);
        let stream = reader.finish();
        let result_ok = stream.result.as_ref().is_some_and(|r| !r.is_error);
        let mut said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if let Some(r) = stream.result.as_ref().filter(|r| r.is_error) {
            said = format!("{} {said}", r.errors.join("; "));
        }
        if said.is_empty() && !out.status.success() {
            said = format!("exited {}", out.status);
        }
        Ok(Call {
            ok: out.status.success() && result_ok,
            stream,
            said,
        })
    }

    /// The backend's API at the doctor's mock, with a dummy key.
    fn point_at_the_mock(&self, cmd: &mut std::process::Command) -> Result<(), String> {
        let base_url = format!("http://127.0.0.1:{}", self.port);
        let env = crate::agent::backend_for(self.kind)
            .point_at(self.home, &base_url)
            .map_err(|e| format!("cannot point the agent at the mock: {e}"))?;
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        Ok(())
    }
}

/// `argv` as a confined run of `policy` runs it, with `bwrap` at `bwrap`: the command, its
/// environment the policy's allowlist of this one, and the whole command line it runs (what
/// [`crate::sandbox::refusal`] reads the mounts of).
pub(super) fn sandboxed(
    bwrap: &Path,
    policy: &crate::sandbox::Policy,
    argv: &[String],
) -> (std::process::Command, Vec<String>) {
    let args = crate::sandbox::confined(bwrap, policy, argv);
    let mut out = std::process::Command::new(&args[0]);
    out.args(&args[1..]).env_clear();
    for (k, v) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| crate::bridge::env_kept(&policy.env, k))
        {
            out.env(k, v);
        }
    }
    (out, args)
}
