//! Delivery beside the loop: a runner queues each message and goes on deciding; a delivery
//! process of its own, `loop __deliver DIR`, sends what the outbox holds.
//!
//! A decision must never wait for the network: a Telegram that does not answer costs each try
//! its whole timeout, one that refuses costs the waits between tries. So the runner only
//! appends to the outbox (the at-least-once record) and makes sure a delivery process is next
//! in line to send ([`super::line`]). The process runs in a session of its own, so it survives
//! the runner that started it, a Ctrl-C at its terminal and a closed terminal: the DONE message
//! written as a runner exits goes out without waiting for the next `loop` command. One at a
//! time per outbox sends; it keeps the order, honours 429 `retry_after`, and ends once the
//! outbox is empty, when another process waits to take over, or after [`ROUNDS`] rounds of
//! tries that all failed, leaving what is unsent to the next one (the next message or `loop`
//! command starts one).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::delivery::TelegramNotifier;
use super::line::{Line, Sending, Waited};
use super::outbox::{Message, Outbox};
use super::telegram::Config;
use super::{Event, Notifier};

/// The hidden command of the delivery process.
pub(crate) const COMMAND: &str = "__deliver";

/// Failed turns in a row (each tries the oldest pending message a few times) before a
/// delivery process gives up for now: with the default backoff, about 8 minutes of waits
/// between them (1 s doubling up to [`ROUND_CAP`]), plus the tries themselves.
const ROUNDS: u32 = 10;

/// The longest wait between two rounds.
const ROUND_CAP: Duration = Duration::from_secs(300);

/// How often a delivery process waiting between rounds looks whether another waits to take
/// over (a later one, started for a new message: it tries at once).
const LOOK: Duration = Duration::from_millis(200);

/// How long a new delivery process tries to take its place in line. A delivery process
/// waiting there leaves when asked, and a look at the line (a probe of its lock) keeps it out
/// for an instant; only a command waiting for its own message keeps the place, and that one
/// sends what this one came for, or starts another delivery process as it leaves.
const PLACE_WITHIN: Duration = Duration::from_secs(1);

/// Starts `loop __deliver STATE_DIR` (`binary` is the `loop` binary) in a session of its own,
/// with no input or output: what it has to say goes to `loop.log`.
///
/// # Errors
/// When the process cannot be started.
pub(crate) fn start(binary: &Path, state_dir: &Path) -> std::io::Result<Child> {
    let dir = std::path::absolute(state_dir)?;
    let mut cmd = Command::new(binary);
    cmd.arg(COMMAND)
        .arg(&dir)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid, sigprocmask and sigaction are async-signal-safe and touch no memory of
    // the parent. The mask is emptied (the runner blocks SIGINT for its own use, and a command
    // waiting in line blocks the signal that asks a delivery process to leave its place), and
    // that signal's action is the default, which ends the process, even where the parent
    // ignored it (an ignored signal stays ignored across exec).
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            nix::sys::signal::SigSet::empty().thread_set_mask()?;
            nix::sys::signal::signal(super::line::LEAVE, nix::sys::signal::SigHandler::SigDfl)?;
            Ok(())
        });
    }
    cmd.spawn()
}

/// Starts delivery processes for one outbox, on a thread of its own: starting a process costs
/// milliseconds (an exec), which no decision should wait for either. Asks that come while one
/// is being started are served by one start (the process reads the outbox once it sends).
/// Dropping the launcher waits for the starts asked for, so that a runner that exits right
/// after queueing its DONE message leaves a delivery process behind for it.
#[derive(Debug)]
pub(crate) struct Launcher {
    asks: Option<mpsc::Sender<()>>,
    worker: Option<JoinHandle<()>>,
    /// Where to start them, for when no thread could be made: then they start in the caller.
    state_dir: PathBuf,
    binary: PathBuf,
}

impl Launcher {
    pub(crate) fn new(state_dir: &Path, binary: &Path) -> Self {
        let (asks, asked) = mpsc::channel::<()>();
        let (dir, exe) = (state_dir.to_path_buf(), binary.to_path_buf());
        let worker = std::thread::Builder::new()
            .name("deliverer-launcher".into())
            .spawn(move || {
                let mut children = Vec::new();
                while asked.recv().is_ok() {
                    while asked.try_recv().is_ok() {}
                    start_unless_empty(&dir, &exe, &mut children);
                }
            });
        let (asks, worker) = match worker {
            Ok(w) => (Some(asks), Some(w)),
            Err(_) => (None, None),
        };
        Self {
            asks,
            worker,
            state_dir: state_dir.to_path_buf(),
            binary: binary.to_path_buf(),
        }
    }

    /// Makes sure what the outbox holds will be sent: unless nothing is pending, a delivery
    /// process is started, which takes the place next in line (it reads the outbox once it
    /// sends). Returns at once; a failure to start one is logged, and the messages wait for
    /// the next.
    pub(crate) fn deliver(&self) {
        match &self.asks {
            Some(asks) => {
                let _ = asks.send(());
            }
            None => start_unless_empty(&self.state_dir, &self.binary, &mut Vec::new()),
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        drop(self.asks.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// Starts a delivery process unless nothing is pending; reaps those of `children` that ended.
fn start_unless_empty(state_dir: &Path, binary: &Path, children: &mut Vec<Child>) {
    children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
    let outbox = Outbox::new(state_dir);
    if outbox.pending().is_ok_and(|p| p.is_empty()) {
        return;
    }
    match start(binary, state_dir) {
        Ok(child) => children.push(child),
        Err(e) => {
            let _ = crate::decision_log::append(
                state_dir,
                &format!(
                    "notify: could not start the delivery process {} {COMMAND} ({e}); the \
                     messages wait in {} for the next one",
                    binary.display(),
                    outbox.path().display()
                ),
            );
        }
    }
}

/// A runner's notifier with Telegram: queues each message, durably, and leaves the sending to
/// a delivery process. With no `loop` binary to start, messages only queue, and go out with
/// the next `loop` command that delivers.
#[derive(Debug)]
pub(crate) struct Queued {
    sender: TelegramNotifier,
    launcher: Option<Launcher>,
}

impl Queued {
    pub(crate) fn new(state_dir: &Path, config: Config, binary: Option<&Path>) -> Self {
        Self {
            sender: TelegramNotifier::new(state_dir, config),
            launcher: binary.map(|b| Launcher::new(state_dir, b)),
        }
    }

    /// Starts delivering what the outbox holds, if anything.
    pub(crate) fn deliver(&self) {
        if let Some(l) = &self.launcher {
            l.deliver();
        }
    }

    /// Queues `messages` and has them delivered. When the outbox cannot be written, they are
    /// sent on a thread of their own: no guarantee then, but still no wait.
    pub(crate) fn send(&self, kind: &str, messages: Vec<Message>) {
        if messages.is_empty() {
            self.sender.log(&format!(
                "notify: the {kind} message is empty; nothing sent"
            ));
            return;
        }
        match self.sender.queue(&messages) {
            Ok(()) => self.deliver(),
            Err(e) => {
                self.sender.report(&format!(
                    "notify: could not queue the {kind} message ({e:#}); sending it directly"
                ));
                let sender = self.sender.clone();
                std::thread::spawn(move || sender.send_directly(&messages));
            }
        }
    }
}

impl Notifier for Queued {
    fn notify(&mut self, event: &Event) {
        self.send(event.kind(), TelegramNotifier::messages(event));
    }
}

/// `loop __deliver DIR`: takes the place next in line to send from the outbox of `state_dir`,
/// then sends until the outbox is empty, another waits to take over, or [`ROUNDS`] rounds have
/// failed.
///
/// # Errors
/// When the outbox cannot be read or written.
pub(crate) fn run(state_dir: &Path) -> anyhow::Result<()> {
    let Ok(Some(config)) = Config::from_env() else {
        return Ok(());
    };
    let sender = TelegramNotifier::new(state_dir, config);
    match sender.line().wait_turn(PLACE_WITHIN, None, || false)? {
        Waited::Turn(sending) => rounds(&sender, &sending),
        Waited::Queued | Waited::Busy(_) | Waited::Done => Ok(()),
    }
}

/// Turns until the outbox is empty, waiting between failed ones (still holding the turn:
/// nobody could send before the oldest message anyway); hands over to a process that waits
/// to send next, and gives up after [`ROUNDS`] failed turns in a row.
fn rounds(sender: &TelegramNotifier, sending: &Sending) -> anyhow::Result<()> {
    let began = Instant::now();
    let mut backoff = Backoff::new(sender.config().backoff_base, ROUND_CAP);
    loop {
        let report = sender.turn(sending)?;
        let Some(why) = report.error else {
            return Ok(());
        };
        if report.sent > 0 {
            backoff.reset();
        }
        if backoff.failures() + 1 >= ROUNDS {
            sender.log(&format!(
                "notify: {} message(s) still not delivered after {} of tries; they wait in {} \
                 for the next message or `loop` command (or `loop notify --flush`): {why}",
                report.pending,
                crate::duration::human(began.elapsed()),
                sender.outbox().path().display()
            ));
            return Ok(());
        }
        if someone_waits_during(sender.line(), backoff.next_wait()) {
            return Ok(());
        }
    }
}

/// Waits `wait`, or less if another process comes to wait in line; whether one did.
fn someone_waits_during(line: &Line, wait: Duration) -> bool {
    let end = Instant::now() + wait;
    loop {
        if line.waiting() {
            return true;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(LOOK));
    }
}
