//! [`TestLoop`]: a loop in a temporary directory, with the real `loop` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use claude_sim::scenario::Scenario;
use m1loop::bridge::procfs;
use m1loop::m1::{Document, GateKind, GateState, M1, Status, StepState};
use serde_json::Value;

use super::procs::{self, Escapees, Proc, task_processes};
use super::{Guard, LOOP, PATIENCE, SIM, Temp, code, run, run_within, stderr, stdout, wait_until};

/// A loop in a temporary directory. Build it as the test needs it, then drive `loop` and say
/// what must hold:
///
/// ```ignore
/// let env = TestLoop::new().env("CLAUDECODE", "1");
/// env.scenario(&Scenario::new().otherwise(Action::done("ok")));
/// env.run_ok(&["start", "g", "--step", "one"]);
/// env.assert_status(Status::Done);
/// ```
///
/// `project/` is where `loop` runs, with the loop's `state/M1.md`. Outside the project (and
/// its git) are the stop file, the per-user directory `xdg/`, the temporary directory `tmp/`,
/// and the simulated agent's scenario and call log ([`Temp`]). Every `loop` run from here has the simulated agent as its
/// agent, this stop file and per-user directory, no Telegram, and no input. Dropping it kills
/// whatever its loops and tasks left running.
pub struct TestLoop {
    /// The temporary directory: the project, the stop file, the per-user directory, the
    /// scenario and the agent's log.
    pub temp: Temp,
    project: PathBuf,
    pub file: PathBuf,
    pub stop: PathBuf,
    env: Vec<(String, String)>,
}

impl TestLoop {
    /// A project with an empty `state/` and no loop yet.
    #[must_use]
    pub fn new() -> Self {
        let temp = Temp::new();
        let project = temp.join("project");
        std::fs::create_dir_all(project.join("state")).unwrap();
        std::fs::create_dir(temp.join("tmp")).unwrap();
        std::fs::create_dir_all(temp.sim_dir()).unwrap();
        Self {
            file: project.join("state").join("M1.md"),
            stop: temp.join("croppy-stop"),
            project,
            temp,
            env: Vec::new(),
        }
    }

    /// The project is a directory named `name` (with its empty `state/`) instead.
    #[must_use]
    pub fn in_project_named(mut self, name: &str) -> Self {
        self.project = self.temp.join(name);
        std::fs::create_dir_all(self.project.join("state")).unwrap();
        self.file = self.project.join("state").join("M1.md");
        self
    }

    /// Without `state/`, as a directory where no loop ever ran.
    #[must_use]
    pub fn without_state(self) -> Self {
        std::fs::remove_dir(self.state()).unwrap();
        self
    }

    /// The project is a git repository with a first (empty) commit, so that a step's work is
    /// a diff a reviewer sees.
    #[must_use]
    pub fn with_git(self) -> Self {
        self.git(&["init", "-q"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", "start"]);
        self
    }

    /// Sets `key` for every `loop` run from here, over what it is given otherwise.
    #[must_use]
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        let value = value.as_ref().to_string_lossy().into_owned();
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value));
        self
    }

    /// The project directory, where `loop` runs.
    pub fn path(&self) -> &Path {
        &self.project
    }

    pub fn state(&self) -> PathBuf {
        self.project.join("state")
    }

    /// The per-user state directory's parent (`XDG_STATE_HOME`) of this test's processes.
    pub fn xdg(&self) -> PathBuf {
        self.temp.join("xdg")
    }

    /// Writes the simulated agent's scenario: what each of its calls answers.
    pub fn scenario(&self, scenario: &Scenario) {
        self.temp
            .scenario(&serde_json::to_string(scenario).expect("a scenario is JSON"));
    }

    /// `sh -c SCRIPT` with `$0` the loop binary, in this loop's directory and environment.
    pub fn sh(&self, script: &str) -> Command {
        let template = self.cmd(&[]);
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).arg(super::LOOP);
        super::take_env_and_dir(&mut cmd, &template);
        cmd
    }

    /// `loop ARGS` as this loop runs it, with no input and its output discarded.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(LOOP);
        c.args(args)
            .current_dir(&self.project)
            .env("LOOP_FILE", &self.file)
            .env("LOOP_AGENT", SIM)
            .env("LOOP_STOP_FILE", &self.stop)
            .env("XDG_STATE_HOME", self.xdg())
            // What a loop puts in the temporary directory (the demo's project) goes with the test's.
            .env("TMPDIR", self.temp.join("tmp"))
            .env("CLAUDE_SIM_SCENARIO", self.temp.join("sim/scenario.json"))
            .env("CLAUDE_SIM_LOG", self.temp.sim_log())
            // The simulated agent keeps its log and counts there: its runs, confined, may
            // write that and nothing else of the test's.
            .env("LOOP_SANDBOX_WRITE", self.temp.sim_dir())
            // Its variables say where those are: a run keeps them as any program's would.
            .env("LOOP_SANDBOX_ENV", "CLAUDE_SIM_*")
            // The real captures the simulated agent replays.
            .env(
                "LOOP_SANDBOX_READ",
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
            )
            .env("LOOP_NOTIFY_BACKOFF_MS", "10")
            // A test that kills a runner resumes it itself; tests of revival turn it on.
            .env("LOOP_REVIVE", "off")
            .env_remove("TELEGRAM_BOT_TOKEN")
            .env_remove("TELEGRAM_CHAT_ID")
            .env_remove("TELEGRAM_API_BASE")
            .env_remove("LOOP_CRASH_AT")
            // No trace goes anywhere a test did not say.
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("TRACEPARENT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !super::bwrap_here() {
            // Loops are confined by default; where bubblewrap cannot run, they run unconfined
            // and the tests say so (`skipped:` once), rather than fail for the machine.
            c.env("LOOP_SANDBOX", "off");
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs `loop ARGS` to its end (at most `timeout`).
    pub fn run_for(&self, args: &[&str], timeout: Duration) -> Output {
        run_within(self.cmd(args), timeout)
    }

    /// Runs `loop ARGS` to its end (at most a minute).
    pub fn run(&self, args: &[&str]) -> Output {
        run(self.cmd(args))
    }

    /// Runs `loop ARGS` to its end, which must be exit 0.
    #[track_caller]
    pub fn run_ok(&self, args: &[&str]) -> Output {
        self.run_exits(0, args)
    }

    /// Runs `loop ARGS` to its end, which must be exit `want`.
    #[track_caller]
    pub fn run_exits(&self, want: i32, args: &[&str]) -> Output {
        let out = self.run(args);
        self.assert_exit(&out, want);
        out
    }

    pub fn spawn(&self, args: &[&str]) -> Guard {
        Guard::spawn(&mut self.cmd(args))
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap()
    }

    pub fn m1(&self) -> M1 {
        let text = self.text();
        Document::parse(&text)
            .unwrap_or_else(|e| panic!("M1.md invalid: {e}\n{text}"))
            .view()
    }

    /// Every agent call, as the simulated agent logged it when it started.
    pub fn calls(&self) -> Vec<Value> {
        self.temp.calls()
    }

    /// The prompt of agent call `n` (0-based), as the simulated agent logged it.
    pub fn prompt(&self, n: usize) -> String {
        self.calls()[n]["prompt"].as_str().unwrap().to_string()
    }

    /// What the hooks the simulated agent ran printed, one JSON object a hook run.
    pub fn hook_runs(&self) -> Vec<Value> {
        let mut path = self.temp.sim_log().into_os_string();
        path.push(".hooks.jsonl");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The text of M1.md while step `during` runs, returned once step `after` has started: what
    /// an editor that loaded the file then and never reloaded it would save.
    #[track_caller]
    pub fn text_while_running(&self, during: u32, after: u32) -> String {
        let running = wait_until(Duration::from_secs(30), || {
            self.calls_for(during) == 1
                && self.m1().plan.steps[during as usize - 1].state == StepState::Running
        });
        assert!(running, "step {during} never ran\n{}", self.log());
        let old = self.text();
        let started = wait_until(Duration::from_secs(30), || self.calls_for(after) == 1);
        assert!(started, "step {after} never started\n{}", self.log());
        old
    }

    /// The agent calls of this loop, as (their place in the call log, the call), split into
    /// the steps' own and the reviewers'.
    pub fn step_and_review_calls(&self) -> (Calls, Calls) {
        self.calls()
            .into_iter()
            .enumerate()
            .partition(|(_, c)| !is_review(c))
    }

    /// Runs a one-step loop (`start g --step one`) to DONE in two agent calls, the second in
    /// a fresh session (no `--resume`); the calls.
    #[track_caller]
    pub fn run_in_two_calls_the_second_fresh(&self) -> Vec<Value> {
        self.run_ok(&["start", "g", "--step", "one"]);
        let calls = self.calls();
        assert_eq!(calls.len(), 2);
        assert!(
            calls[1]["resume"].is_null(),
            "a fresh session, not --resume"
        );
        calls
    }

    /// A loop of `steps` to run at once, each `(name, ms)` writing `name.txt` after `ms` of
    /// work, planned with `--parallel` (as many slots as steps) and `--plan-only`, and
    /// `extra` flags: `loop resume` runs it.
    pub fn plan_parallel(&self, steps: &[(&str, u64)], extra: &[&str]) {
        let mut scenario = claude_sim::scenario::Scenario::new();
        for (k, (name, ms)) in (1..).zip(steps) {
            let work = claude_sim::scenario::Action::done(name)
                .sleep_ms(*ms)
                .write(&format!("{name}.txt"), &format!("{name}\n"));
            scenario = scenario.step(k, work);
        }
        self.scenario(&scenario);
        let n = steps.len().to_string();
        let mut args = vec!["start", "g", "--parallel", n.as_str(), "--plan-only"];
        for (name, _) in steps {
            args.extend(["--step", name]);
        }
        args.extend(extra);
        self.run_ok(&args);
    }

    pub fn calls_for(&self, step: u32) -> usize {
        let want = step.to_string();
        self.calls()
            .iter()
            .filter(|c| {
                c["step"].as_str() == Some(want.as_str())
                    || c["step"].as_u64() == Some(u64::from(step))
            })
            .count()
    }

    /// `loop` exited with `want`; if not, what it printed, M1.md and what the loop logged say
    /// why.
    #[track_caller]
    pub fn assert_exit(&self, out: &Output, want: i32) {
        let got = code(out);
        assert!(
            got == want,
            "loop exited {got}, not {want}\n--- stdout\n{}--- stderr\n{}--- M1.md\n{}--- loop.log\n{}",
            stdout(out),
            stderr(out),
            std::fs::read_to_string(&self.file).unwrap_or_default(),
            self.log()
        );
    }

    /// `loop ARGS` (its command given to `tweak` first) is refused with exit 2 and `want` in
    /// what it says, and changes nothing: M1.md byte for byte, no archive or other file beside
    /// it, no agent call.
    #[track_caller]
    pub fn assert_refused(&self, args: &[&str], tweak: impl FnOnce(&mut Command), want: &str) {
        let listing = |dir: &Path| {
            let mut v: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            v.sort();
            v
        };
        let before = std::fs::read(&self.file).unwrap();
        let files = listing(&self.state());
        let mut cmd = self.cmd(args);
        tweak(&mut cmd);
        let out = run(cmd);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {want:?} not in {err}");
        assert_eq!(
            std::fs::read(&self.file).unwrap(),
            before,
            "{args:?} changed M1.md"
        );
        assert_eq!(listing(&self.state()), files, "{args:?} wrote beside M1.md");
        assert!(self.calls().is_empty(), "{args:?} ran the agent");
    }

    /// The loop's STATUS is `want`.
    #[track_caller]
    pub fn assert_status(&self, want: Status) {
        let got = self.m1().status;
        assert!(
            got == want,
            "STATUS {got:?}, not {want:?}\n{}\n--- loop.log\n{}",
            self.text(),
            self.log()
        );
    }

    /// `loop.log` says `what`.
    #[track_caller]
    pub fn assert_logged(&self, what: &str) {
        let log = self.log();
        assert!(log.contains(what), "{what:?} is not in loop.log:\n{log}");
    }

    /// A command that makes an agent's call wait until the test has saved its edit with
    /// [`Self::save_then_go_on`] (a file in the project, which a run sees as the test does):
    /// an edit made while a step runs lands while it runs, however slow the machine.
    pub fn hold(&self) -> String {
        format!(
            "while [ ! -e '{}' ]; do sleep 0.02; done",
            self.edited().display()
        )
    }

    fn edited(&self) -> PathBuf {
        self.project.join(".edited")
    }

    /// Saves `edit` of M1.md's text as a person's editor would, checks that it changed the
    /// text, waits until the runner has read it (it logs a hand edit), and only then lets the
    /// agents held by [`Self::hold`] go on: the edit is one made, and seen, while the step
    /// runs, however slow the machine.
    pub fn save_then_go_on(&self, edit: impl Fn(&str) -> String) {
        let before = self.text();
        let after = edit(&before);
        assert_ne!(after, before, "the edit changes nothing in:\n{before}");
        let read = |log: &str| log.matches("M1.md was changed by hand").count();
        let was = read(&self.log());
        std::fs::write(&self.file, after).unwrap();
        assert!(
            wait_until(PATIENCE, || read(&self.log()) > was),
            "the runner did not read the edit while the step ran\n{}",
            self.log()
        );
        std::fs::write(self.edited(), "").unwrap();
    }

    /// Waits until step `step`'s agent was started `n` times in all.
    #[track_caller]
    pub fn wait_for_calls(&self, step: u32, n: usize) {
        let started = wait_until(PATIENCE, || self.calls_for(step) == n);
        assert!(
            started,
            "step {step}'s agent started {} times, not {n}\n{}",
            self.calls_for(step),
            self.log()
        );
    }

    /// Waits up to `within` until the loop's STATUS is `want`; if it is not by then, M1.md and
    /// what the loop logged say why.
    #[track_caller]
    pub fn wait_for_status(&self, want: Status, within: Duration) {
        let reached = wait_until(within, || self.m1().status == want);
        assert!(
            reached,
            "STATUS not {want:?} within {within:?}\n--- M1.md\n{}--- loop.log\n{}",
            std::fs::read_to_string(&self.file).unwrap_or_default(),
            self.log()
        );
    }

    /// The loop waited once (a backoff or a usage limit) and `loop.log` says so once: where
    /// the runner recorded the wait, not again when it came to wait.
    #[track_caller]
    pub fn assert_one_wait_logged(&self) {
        let log = self.log();
        let waits = log
            .lines()
            .filter(|l| l.contains("backoff") || l.contains("wait: until"))
            .count();
        assert_eq!(waits, 1, "{log}");
    }

    /// The loop is DONE, each of steps 1 to `steps` is DONE with `summary` and its agent was
    /// started once, and nothing is left running: whatever happened to the loop on the way,
    /// no step was lost or run twice.
    #[track_caller]
    pub fn assert_each_step_done_once(&self, steps: u32, summary: &str) {
        self.assert_status(Status::Done);
        self.assert_each_step_started_once(steps, "at the end");
        let m = self.m1();
        for n in 1..=steps {
            assert_eq!(m.plan.steps[n as usize - 1].state, StepState::Done);
            assert_eq!(
                m.results[&n].summary.as_deref(),
                Some(summary),
                "step {n}\n{}",
                self.text()
            );
        }
        self.assert_no_processes();
    }

    /// The agent of each of steps 1 to `steps` was started exactly once; `context` says
    /// after what.
    #[track_caller]
    pub fn assert_each_step_started_once(&self, steps: u32, context: &str) {
        for n in 1..=steps {
            let calls = self.calls_for(n);
            assert_eq!(
                calls,
                1,
                "{context}: step {n} started {calls} times\n{}",
                self.log()
            );
        }
    }

    /// Live processes started for this test: their working directory or command line is
    /// inside its temporary directory.
    pub fn processes(&self) -> Vec<String> {
        procs::live_processes_under(self.temp.path())
    }

    #[track_caller]
    pub fn assert_no_processes(&self) {
        let ok = wait_until(Duration::from_secs(10), || self.processes().is_empty());
        assert!(ok, "processes left running: {:?}", self.processes());
    }

    /// Runs git in the project directory with a throwaway identity, asserting that it
    /// succeeded; returns its stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let out = run(Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(&self.project)
            .stdin(Stdio::null()));
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state().join("loop.log")).unwrap_or_default()
    }
}

/// The exec bridge's tasks of this loop: `loop fire`, `check`, and their records.
impl TestLoop {
    pub fn task_file(&self, id: &str, name: &str) -> PathBuf {
        self.state().join("tasks").join(id).join(name)
    }

    pub fn json(&self, id: &str, name: &str) -> Option<Value> {
        let text = std::fs::read_to_string(self.task_file(id, name)).ok()?;
        Some(serde_json::from_str(&text).unwrap())
    }

    /// `loop ARGS` that starts the loop `g` of `steps`, in their order, with `flags` after them.
    pub fn start_args<'a>(steps: &[&'a str], flags: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["start", "g"];
        for step in steps {
            args.extend(["--step", step]);
        }
        args.extend(flags);
        args
    }

    /// `loop ARGS` that starts a loop of two steps with `--approve-plan`: it opens gate G1
    /// and runs nothing until the plan is approved.
    pub fn start_for_approval() -> Vec<&'static str> {
        Self::start_args(&["one", "two"], &["--approve-plan"])
    }

    /// Starts a loop of two steps with `--approve-plan` ([`TestLoop::start_for_approval`]): it
    /// waits on gate G1, having run nothing.
    #[track_caller]
    pub fn start_waiting_for_approval(&self) {
        self.scenario(&super::answers::passing());
        self.run_exits(3, &Self::start_for_approval());
        self.assert_status(Status::Waiting);
        assert_eq!(self.calls().len(), 0, "no agent runs before the approval");
        let m = self.m1();
        let g = m.gate("G1").expect("a plan gate");
        assert_eq!((g.kind, g.state), (GateKind::Plan, GateState::Pending));
        assert!(m.next_action.unwrap().contains("loop approve G1"));
        let status = stdout(&self.run_ok(&["status"]));
        assert!(
            status.contains("GATE G1      PLAN PENDING: the plan of 2 step(s)")
                && status.contains("loop approve G1"),
            "{status}"
        );
    }

    /// `loop fire ARGS`, which must succeed; the task id.
    pub fn fire(&self, args: &[&str]) -> String {
        let mut fire = vec!["fire"];
        fire.extend(args);
        let out = self.run(&fire);
        assert!(
            out.status.success(),
            "fire failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert!(id.starts_with("task_"), "fire printed {id:?}");
        id
    }

    /// `loop check ID --json`, which must answer (exit 0 for DONE, 10 to 14 for the other
    /// states).
    pub fn check(&self, id: &str) -> Value {
        let out = self.run(&["check", id, "--json"]);
        let code = out.status.code().unwrap_or(-1);
        assert!(
            code == 0 || (10..=14).contains(&code),
            "check failed with {code}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Polls `check` until the task has left RUNNING; the final report.
    pub fn wait_final(&self, id: &str) -> Value {
        let mut last = Value::Null;
        let ended = wait_until(PATIENCE, || {
            last = self.check(id);
            last["state"] != "RUNNING"
        });
        assert!(ended, "task {id} still running: {last}");
        last
    }

    /// The command's pid (= process group), once the supervisor has recorded it.
    pub fn leader(&self, id: &str) -> i32 {
        assert!(
            wait_until(PATIENCE, || self.json(id, "pid.json").is_some()),
            "no pid.json"
        );
        let pid = self.json(id, "pid.json").unwrap()["pid"].as_i64().unwrap();
        i32::try_from(pid).unwrap()
    }

    /// `loop fire OPTS -- sh -c SCRIPT`, where SCRIPT starts a `setsid` child and a plain
    /// background child (as [`procs::ESCAPEES`] does); returns once both run as `sleep`, the
    /// escapee in a session of its own, the grandchild in the task's group.
    pub fn fire_with_escapees(&self, opts: &[&str], script: &str) -> Escapees {
        procs::require_setsid();
        let mut args = opts.to_vec();
        args.extend(["--", "sh", "-c", script]);
        let id = self.fire(&args);
        let leader = self.leader(&id);
        let mut found = None;
        let ready = wait_until(PATIENCE, || {
            let procs = task_processes(&id);
            let sleeping = |p: &&Proc| p.name == "sleep";
            let escapee = procs
                .iter()
                .filter(sleeping)
                .find(|p| p.sid == p.pid && p.pgid != leader);
            let grandchild = procs.iter().filter(sleeping).find(|p| p.pgid == leader);
            found = escapee.cloned().zip(grandchild.cloned());
            found.is_some()
        });
        assert!(
            ready,
            "no escapee and grandchild: {:?}",
            task_processes(&id)
        );
        let (escapee, grandchild) = found.unwrap();
        Escapees {
            id,
            leader,
            escapee,
            grandchild,
        }
    }

    /// The guardian: the supervisor's child that is not the command.
    pub fn guardian(&self, id: &str) -> i32 {
        let supervisor = self.supervisor(id);
        let leader = self.leader(id);
        let children: Vec<i32> = procfs::pids()
            .into_iter()
            .filter(|&p| p != leader && procs::ppid(p) == Some(supervisor))
            .collect();
        assert_eq!(
            children.len(),
            1,
            "supervisor children besides the command: {children:?}"
        );
        children[0]
    }

    pub fn supervisor(&self, id: &str) -> i32 {
        let pid = self
            .json(id, "supervisor.json")
            .expect("no supervisor.json")["pid"]
            .as_i64();
        i32::try_from(pid.unwrap()).unwrap()
    }
}

/// Agent calls with their place in the call log.
pub type Calls = Vec<(usize, Value)>;

/// Whether a logged agent call is a reviewer's: the runner starts reviewers in plan mode.
pub fn is_review(call: &Value) -> bool {
    flag_value(call, "--permission-mode").as_deref() == Some("plan")
}

/// A step's `REVIEW` result as M1.md words it (`approved: …`, `pending`).
pub fn review_text(result: &m1loop::m1::StepResult) -> Option<String> {
    result.review.as_ref().map(ToString::to_string)
}

/// The arguments of a logged agent call.
pub fn argv(call: &Value) -> Vec<String> {
    call["argv"]
        .as_array()
        .expect("a logged call has its argv")
        .iter()
        .map(|a| a.as_str().expect("each argument is a string").to_owned())
        .collect()
}

/// The value after `flag` in a logged agent call's arguments, if the flag is there.
pub fn flag_value(call: &Value, flag: &str) -> Option<String> {
    let argv = argv(call);
    let at = argv.iter().position(|a| a == flag)?;
    argv.get(at + 1).cloned()
}

impl Drop for TestLoop {
    /// Nothing a test started may outlive it: first whatever its tasks left (supervisors,
    /// guardians, command groups, by their records and by their task id), then every process
    /// whose working directory or command line is in its temporary directory.
    fn drop(&mut self) {
        if let Ok(tasks) = std::fs::read_dir(self.state().join("tasks")) {
            for task in tasks.flatten() {
                end_task(&task.path());
            }
        }
        for line in procs::live_processes_under(self.temp.path()) {
            if let Some(pid) = line.split_whitespace().next() {
                procs::sigkill(pid.parse().unwrap());
            }
        }
    }
}

/// Kills what the task in `dir` left: its processes by task id, its supervisor and the
/// members of its command's group. Each is recognised by more than its pid: by the end of a
/// test, its pids may belong to another test's processes.
fn end_task(dir: &Path) {
    if let Some(id) = dir.file_name().and_then(|n| n.to_str()) {
        procs::kill_task_processes(id);
    }
    let read = |name: &str| -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).ok()?).ok()
    };
    if let Some(rec) = read("supervisor.json")
        && let (Some(pid), Some(start)) = (rec["pid"].as_i64(), rec["start_ticks"].as_u64())
    {
        let pid = i32::try_from(pid).unwrap();
        if procfs::stat(pid).is_some_and(|s| s.start_ticks == start) {
            procs::sigkill(pid);
        }
    }
    if let Some(rec) = read("pid.json")
        && let (Some(pgid), Some(sid), Some(start)) = (
            rec["pid"].as_i64(),
            rec["sid"].as_i64(),
            rec["start_ticks"].as_u64(),
        )
    {
        // The group's members: its id, the command's session, started no earlier than it.
        let (pgid, sid) = (i32::try_from(pgid).unwrap(), i32::try_from(sid).unwrap());
        for pid in procfs::pids() {
            if procfs::stat(pid)
                .is_some_and(|s| s.pgid == pgid && s.sid == sid && s.start_ticks >= start)
            {
                procs::sigkill(pid);
            }
        }
    }
}

/// The assertions above fail when what they say does not hold: a test built on one that
/// could not fail would test nothing.
mod the_assertions_can_fail {
    use m1loop::m1::Status;

    use super::TestLoop;

    #[test]
    #[should_panic(expected = "loop exited 0, not 3")]
    fn an_exit_code() {
        TestLoop::new().run_exits(3, &["--help"]);
    }

    #[test]
    #[should_panic(expected = "STATUS Waiting, not Done")]
    fn a_status() {
        let env = TestLoop::new();
        std::fs::write(&env.file, "STATUS: WAITING\nGOAL: g\n").unwrap();
        env.assert_status(Status::Done);
    }

    #[test]
    #[should_panic(expected = "\"never said\" is not in loop.log")]
    fn a_log_line() {
        TestLoop::new().assert_logged("never said");
    }
}
