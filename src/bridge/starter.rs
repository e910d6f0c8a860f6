//! The starter: where a firing process gets its supervisors from, without starting the `loop`
//! binary anew for each task.
//!
//! A supervisor runs in a session of its own and is never the firing process's child. It
//! used to be `loop __supervise DIR`, started by `fire` for each task, which forked the real
//! supervisor and exited: a new process of the whole binary (dynamic loading, the C
//! library's CPU detection, the command line parsed) and two forks between `fire` and the
//! agent, which cost a loop about 2 ms a step on its critical path (3.5 ms from `fire` to
//! the agent's start, on a virtual machine where the CPU detection traps to the
//! hypervisor). The firing process cannot fork the supervisor itself: it may have threads
//! (the runner's file watch), and a forked copy of such a process may only call
//! async-signal-safe functions.
//!
//! So the first `fire` of a process starts one `loop __starter`: single-threaded, in a
//! process group of its own (a Ctrl-C at the terminal is its firer's to handle), its
//! standard input a socket to its firer. It lives as long as the firer holds that socket:
//! EOF ends it. For each task, the firer sends the task directory, its own environment, and
//! the task's held lock and opened log as descriptors; the starter forks, and the fork
//! becomes the supervisor: a new session, the log as its stderr, the firer's environment of
//! this moment, `loop __supervise DIR` as the command line `ps` shows ([`super::title`]);
//! once it has started the command, it records itself in `supervisor.json` and tells the
//! starter, which answers the firer.
//! So `fire` returns when it did before: once the task is under supervision, its lock never
//! free in between. The supervisors are the starter's children while it lives (it reaps
//! each as it ends), then init's, as before.
//!
//! On the socket, a request is a little-endian `u32` length, then the task directory and
//! `KEY=VALUE` entries of the environment, each ended by a NUL, with the lock and the log
//! passed as `SCM_RIGHTS` on its first byte. The answer is a `u32` length and a UTF-8 text:
//! empty when the supervisor runs, else why it does not.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, UnixAddr, recvmsg, sendmsg};
use nix::unistd::{ForkResult, dup2_stderr, fork};

use crate::exit::{Status, code};

/// The hidden command of the starter.
pub(crate) const COMMAND: &str = "__starter";

/// Room for the command line a supervisor shows (`loop __supervise DIR`): the starter is
/// started with an argument this long, which it and each fork write over.
const ROOM: usize = 4096;

/// Requests larger than this are not a firer's: the starter ends.
const MAX_REQUEST: usize = 16 << 20;

/// This process's starter, once its first task was fired.
static STARTER: Mutex<Option<Starter>> = Mutex::new(None);

#[derive(Debug)]
struct Starter {
    child: Child,
    socket: UnixStream,
    /// The process that started it: a fork of that process must not share its socket.
    owner: u32,
}

/// How a request to the starter went wrong.
enum Failed {
    /// The starter did not take the request (it had died): a new one may be asked.
    NotSent(anyhow::Error),
    /// It may have been taken: asking again could start a second supervisor.
    Unanswered(anyhow::Error),
}

/// Starts the supervisor of the task in `task_dir` through this process's starter (starting
/// one with the binary `exe` first, or again if the last one died), handing it the task's
/// held `lock` and its `log` for stderr; returns once the supervisor runs.
///
/// # Errors
/// When no starter can be started or asked, or the supervisor could not be started (the
/// text says why; the log says more).
/// `waiting` is called every [`PATIENCE`] while the supervisor is not running yet, with the
/// time waited (a supervisor waits for room to make its command's output files on a full
/// disk).
pub(super) fn start(
    exe: &Path,
    task_dir: &Path,
    (lock, log): (&File, &File),
    waiting: &mut dyn FnMut(Duration),
) -> anyhow::Result<()> {
    let mut slot = STARTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    start_in(&mut slot, exe, task_dir, (lock, log), waiting)
}

/// How long a firer waits for its supervisor's answer before it is told again that it waits.
const PATIENCE: Duration = Duration::from_secs(2);

/// [`start`] with the starter in `slot`.
fn start_in(
    slot: &mut Option<Starter>,
    exe: &Path,
    task_dir: &Path,
    (lock, log): (&File, &File),
    waiting: &mut dyn FnMut(Duration),
) -> anyhow::Result<()> {
    let request = encode(task_dir);
    if slot.as_ref().is_some_and(|s| s.owner != std::process::id()) {
        // Inherited through a fork: the socket is the parent's; leave it to the parent.
        std::mem::forget(slot.take());
    }
    loop {
        let fresh = slot.is_none();
        let starter = match slot.as_mut() {
            Some(s) => s,
            None => slot.insert(Starter::spawn(exe)?),
        };
        match starter.ask(&request, lock, log, waiting) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(why)) => anyhow::bail!("{why}"),
            Err(failed) => {
                if let Some(dead) = slot.take() {
                    dead.end();
                }
                match failed {
                    // One that died since the last task never took this request: a new one may.
                    Failed::NotSent(_) if !fresh => {}
                    Failed::NotSent(e) | Failed::Unanswered(e) => {
                        return Err(e.context("while asking the supervisor starter"));
                    }
                }
            }
        }
    }
}

impl Starter {
    fn spawn(exe: &Path) -> anyhow::Result<Self> {
        let (ours, theirs) = UnixStream::pair().context("while creating the starter's socket")?;
        let child = Command::new(exe)
            .arg(COMMAND)
            .arg(" ".repeat(ROOM))
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .current_dir("/")
            .process_group(0)
            .spawn()
            .with_context(|| format!("while starting {} {COMMAND}", exe.display()))?;
        Ok(Self {
            child,
            socket: ours,
            owner: std::process::id(),
        })
    }

    /// Sends a request; the answer: `Err(why)` when the supervisor could not be started.
    fn ask(
        &mut self,
        request: &[u8],
        lock: &File,
        log: &File,
        waiting: &mut dyn FnMut(Duration),
    ) -> Result<Result<(), String>, Failed> {
        let fds = [lock.as_raw_fd(), log.as_raw_fd()];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        let sent = sendmsg::<UnixAddr>(
            self.socket.as_raw_fd(),
            &[IoSlice::new(request)],
            &cmsg,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(|e| Failed::NotSent(anyhow::Error::from(e)))?;
        let unanswered = |e: std::io::Error| Failed::Unanswered(e.into());
        self.socket
            .write_all(&request[sent..])
            .map_err(unanswered)?;
        let asked = std::time::Instant::now();
        loop {
            let mut fds = [PollFd::new(self.socket.as_fd(), PollFlags::POLLIN)];
            let patience = PollTimeout::try_from(PATIENCE).unwrap_or(PollTimeout::NONE);
            match poll(&mut fds, patience) {
                Ok(0) => waiting(asked.elapsed()),
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(unanswered(e.into())),
            }
        }
        let answer = read_framed(&mut self.socket)
            .map_err(unanswered)?
            .ok_or_else(|| {
                Failed::Unanswered(anyhow::anyhow!("the starter ended without answering"))
            })?;
        Ok(if answer.is_empty() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&answer).into_owned())
        })
    }

    /// Lets go of a starter that failed: ends it and waits for it, so no zombie is left.
    fn end(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request for the task in `task_dir`, with this process's environment.
fn encode(task_dir: &Path) -> Vec<u8> {
    let mut body = Vec::with_capacity(8192);
    body.extend_from_slice(task_dir.as_os_str().as_bytes());
    body.push(0);
    for (k, v) in std::env::vars_os() {
        body.extend_from_slice(k.as_bytes());
        body.push(b'=');
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    framed(&body)
}

fn framed(body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut msg = Vec::with_capacity(body.len() + 4);
    msg.extend_from_slice(&len.to_le_bytes());
    msg.extend_from_slice(body);
    msg
}

/// One framed message from `from`; `None` at end of stream before its first byte.
fn read_framed(from: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match from.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_REQUEST {
        return Err(std::io::Error::other("message too large"));
    }
    let mut body = vec![0u8; len];
    from.read_exact(&mut body)?;
    Ok(Some(body))
}

/// What the starter is asked to start.
struct Request {
    task_dir: PathBuf,
    env: Vec<(OsString, OsString)>,
    lock: File,
    log: File,
}

/// Reads the next request: its first bytes with the descriptors, then the rest. `None` when
/// the firer closed the socket.
fn receive(socket: &mut UnixStream) -> anyhow::Result<Option<Request>> {
    let mut first = vec![0u8; 64 * 1024];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let (got, fds) = {
        let mut iov = [IoSliceMut::new(&mut first)];
        let msg = recvmsg::<UnixAddr>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .context("while reading a request")?;
        let mut fds: Vec<OwnedFd> = Vec::new();
        for c in msg
            .cmsgs()
            .context("while reading a request's descriptors")?
        {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: the kernel just installed these descriptors in this process for
                // this message; nothing else owns them.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        (msg.bytes, fds)
    };
    if got == 0 {
        return Ok(None);
    }
    let mut data = first[..got].to_vec();
    anyhow::ensure!(
        data.len() >= 4 || read_more(socket, &mut data, 4),
        "a cut request"
    );
    let len = u32::from_le_bytes(data[..4].try_into().expect("4 bytes")) as usize;
    anyhow::ensure!(len <= MAX_REQUEST, "a request of {len} bytes");
    anyhow::ensure!(read_more(socket, &mut data, 4 + len), "a cut request");
    let [lock, log]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|_| anyhow::anyhow!("a request without its lock and log"))?;
    let mut parts = data[4..4 + len].split(|b| *b == 0);
    let task_dir = PathBuf::from(OsStr::from_bytes(parts.next().unwrap_or_default()));
    let env = parts
        .filter_map(|kv| {
            // As the standard library reads an environment: a name is never empty.
            let eq = kv.iter().skip(1).position(|b| *b == b'=')? + 1;
            Some((
                OsString::from_vec(kv[..eq].to_vec()),
                OsString::from_vec(kv[eq + 1..].to_vec()),
            ))
        })
        .collect();
    Ok(Some(Request {
        task_dir,
        env,
        lock: File::from(lock),
        log: File::from(log),
    }))
}

/// Reads until `data` holds `want` bytes; `false` at end of stream first.
fn read_more(socket: &mut UnixStream, data: &mut Vec<u8>, want: usize) -> bool {
    if data.len() >= want {
        return true;
    }
    let at = data.len();
    data.resize(want, 0);
    socket.read_exact(&mut data[at..]).is_ok()
}

/// `loop __starter`: serves its firer (on standard input) until it closes the socket.
///
/// # Errors
/// When standard input is not a socket, or a request cannot be read.
pub(crate) fn serve() -> anyhow::Result<Status> {
    // The socket moves off standard input, which becomes /dev/null, as the forks' is.
    let fd = nix::fcntl::fcntl(
        std::io::stdin().as_fd(),
        nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3),
    )
    .context("while taking the socket")?;
    // SAFETY: `fd` was just made by F_DUPFD_CLOEXEC; nothing else owns it.
    let mut socket = UnixStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let null = File::open("/dev/null").context("while opening /dev/null")?;
    nix::unistd::dup2_stdin(&null).context("while replacing standard input")?;
    // The supervisors are its children until it ends: it reaps each as it ends (their time
    // is then counted as its children's, as any waited-for process's).
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block().context("while blocking SIGCHLD")?;
    let ended = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("while creating the signalfd")?;
    // Read before the command line is rewritten (`show`): each supervisor runs this binary.
    let exe = std::env::args_os().next().unwrap_or_else(|| "loop".into());
    show(&exe, &[OsStr::new(COMMAND)]);
    let own = [socket.as_raw_fd(), ended.as_raw_fd()];
    loop {
        let mut fds = [
            PollFd::new(socket.as_fd(), PollFlags::POLLIN),
            PollFd::new(ended.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(anyhow::Error::from(e).context("while waiting for a request")),
        }
        while let Ok(Some(_)) = ended.read_signal() {}
        reap();
        if fds[0].revents().is_none_or(|r| r.is_empty()) {
            continue;
        }
        let Some(request) = receive(&mut socket)? else {
            break; // the firer closed the socket
        };
        let answer = start_one(&own, &exe, request);
        if socket.write_all(&framed(answer.as_bytes())).is_err() {
            break; // the firer is gone
        }
    }
    Ok(Status::Ok)
}

/// Waits for every supervisor of this starter that has ended.
fn reap() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    while let Ok(s) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Shows `EXE ARGS...` as this process's command line.
fn show(exe: &OsStr, args: &[&OsStr]) {
    let mut all = vec![exe];
    all.extend_from_slice(args);
    super::title::set(&all);
}

/// Forks the process that becomes the task's supervisor and says, once it is recorded, how it
/// went: empty when the supervisor runs, else why it does not.
fn start_one(own: &[RawFd], exe: &OsStr, request: Request) -> String {
    let (ready_rx, ready_tx) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return format!("the starter could not make a pipe: {e}"),
    };
    // SAFETY: the starter is single-threaded, so its fork may run any code.
    match unsafe { fork() } {
        Err(e) => format!("the starter could not fork: {e}"),
        Ok(ForkResult::Child) => {
            drop(ready_rx);
            std::process::exit(become_supervisor(own, request, ready_tx, exe))
        }
        Ok(ForkResult::Parent { .. }) => {
            // The fork holds the lock and the log now.
            drop((request, ready_tx));
            // One framed message: the pipe's other end lives on in the supervisor's guardian
            // (forked before the supervisor speaks), so its end of file comes with the task's.
            let said = read_framed(&mut File::from(ready_rx))
                .ok()
                .flatten()
                .unwrap_or_default();
            match said.split_first() {
                Some((b'+', _)) => String::new(),
                Some((_, why)) => String::from_utf8_lossy(why).into_owned(),
                None => "the supervisor ended before it was recorded".into(),
            }
        }
    }
}

/// In the fork: becomes `loop __supervise DIR` for the request's task, telling the starter on
/// `ready` (`+`, or `-` and why not) once it is recorded; its exit code once the task ended.
fn become_supervisor(own: &[RawFd], request: Request, ready: OwnedFd, exe: &OsStr) -> i32 {
    // The socket and the signalfd are the starter's: a supervisor holding the socket would
    // keep the firer from seeing the starter end. (This process exits without dropping
    // anything.) SIGCHLD stays blocked until the supervisor sets its own mask.
    for fd in own {
        let _ = nix::unistd::close(*fd);
    }
    let Request {
        task_dir,
        env,
        lock,
        log,
    } = request;
    let tell = |said: &[u8]| {
        let _ = File::from(ready).write_all(&framed(said));
    };
    if let Err(e) = nix::unistd::setsid().and_then(|_| dup2_stderr(&log)) {
        tell(format!("-could not take a session of its own: {e}").as_bytes());
        return i32::from(code::INTERNAL);
    }
    drop(log);
    take_environment(&env);
    super::title::set(&[exe, OsStr::new("__supervise"), task_dir.as_os_str()]);
    let said = super::supervisor::become_supervisor(&task_dir, lock, |r| match r {
        Ok(()) => tell(b"+"),
        Err(why) => tell(format!("-{why}").as_bytes()),
    });
    match said {
        Ok(status) => i32::from(status.code()),
        Err(e) => {
            crate::errln!("loop: {e:#}");
            i32::from(code::INTERNAL)
        }
    }
}

/// Makes this process's environment the firer's. A name the standard library cannot set (one
/// with `=` in it, from an odd environ) is left as it is.
fn take_environment(env: &[(OsString, OsString)]) {
    let settable = |k: &OsStr| !k.is_empty() && !k.as_bytes().contains(&b'=');
    let wanted: std::collections::HashSet<&OsStr> =
        env.iter().map(|(k, _)| k.as_os_str()).collect();
    for (k, _) in std::env::vars_os() {
        if settable(&k) && !wanted.contains(k.as_os_str()) {
            // SAFETY: this process has a single thread (a fork of the single-threaded
            // starter), so nothing reads the environment while it changes.
            unsafe { std::env::remove_var(&k) };
        }
    }
    for (k, v) in env.iter().filter(|(k, _)| settable(k)) {
        // SAFETY: as above.
        unsafe { std::env::set_var(k, v) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::records::{self, SupervisorRecord};
    use crate::bridge::{FireRequest, kill, wait_until};
    use std::time::Duration;

    /// The `loop` binary beside this test binary (`cargo test` builds it).
    fn loop_binary() -> PathBuf {
        let exe = std::env::current_exe().unwrap();
        let bin = exe.parent().and_then(Path::parent).unwrap().join("loop");
        assert!(bin.is_file(), "{} is missing (cargo build)", bin.display());
        bin
    }

    /// A task directory as `fire` publishes it, with its lock held and its log open.
    fn published(state: &Path, id: &str) -> (PathBuf, File, File) {
        let req = FireRequest {
            command: vec!["sleep".into(), "30".into()],
            ..FireRequest::default()
        };
        let (dir, lock) = crate::bridge::fire::publish_for_test(state, id, &req);
        let log = File::create(dir.join(crate::bridge::records::SUPERVISOR_LOG)).unwrap();
        (dir, lock, log)
    }

    fn cmdline(pid: u32) -> String {
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap())
            .replace('\0', " ")
            .trim()
            .to_owned()
    }

    #[test]
    fn a_starter_that_died_is_replaced_and_each_supervisor_shows_its_task() {
        let state = tempfile::tempdir().unwrap();
        let exe = loop_binary();
        let mut slot = None;
        let mut ids = Vec::new();
        for id in [crate::bridge::new_task_id(), crate::bridge::new_task_id()] {
            let (dir, lock, log) = published(state.path(), &id);
            start_in(&mut slot, &exe, &dir, (&lock, &log), &mut |_| {}).unwrap();
            // Back while the command runs, not once it ended.
            assert!(!dir.join(records::EXIT_FILE).exists());
            let sup: SupervisorRecord = records::read(&dir.join(records::SUPERVISOR_FILE))
                .unwrap()
                .expect("recorded before the start returns");
            assert_eq!(
                cmdline(sup.pid),
                format!("{} __supervise {}", exe.display(), dir.display())
            );
            ids.push(id);
            // Killed between two tasks: the next one gets a new starter.
            let starter = slot.as_mut().unwrap();
            starter.child.kill().unwrap();
            starter.child.wait().unwrap();
        }
        for id in &ids {
            kill(state.path(), id, Duration::from_secs(1)).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        assert!(wait_until(deadline, || {
            ids.iter().all(|id| crate::bridge::survivors(id).is_empty())
        }));
    }

    #[test]
    fn a_request_carries_the_directory_and_the_environment() {
        let msg = encode(Path::new("/s/tasks/t1"));
        let len = u32::from_le_bytes(msg[..4].try_into().unwrap()) as usize;
        assert_eq!(len, msg.len() - 4);
        let mut parts = msg[4..].split(|b| *b == 0);
        assert_eq!(parts.next(), Some(&b"/s/tasks/t1"[..]));
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut want = b"PATH=".to_vec();
        want.extend_from_slice(path.as_bytes());
        assert!(parts.any(|kv| kv == want.as_slice()));
    }
}
