//! The live stream of changes (`GET /api/events`, server-sent events): one `notify` watcher
//! on every loop's state directory and on the per-user directory where loops and runners are
//! noted, watched before `loop serve` prints its address, so that no change from the first
//! request on is missed (the page reads every loop again when its stream opens). When
//! something changes, the loops it concerns are read again, and each whose view changed is
//! sent to every client as an `event: loop` with that view; a loop no longer listed is sent
//! as `event: gone`. Nothing wakes the server but these files and requests: no timer, no poll
//! (unless inotify cannot start, which it says).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, channel, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};

use super::view;
use crate::layout::Layout;

/// Clients of the stream at once: one thread each, fine for a person's browser tabs and a few
/// scripts, and never more.
pub(super) const MAX_CLIENTS: usize = 16;

/// Changes that come together (a runner's write, its log line, a task starting) are read once.
const GATHER: Duration = Duration::from_millis(100);

/// Without inotify, how often the loops are looked at instead.
const POLL: Duration = Duration::from_secs(2);

/// Events waiting for a slow client before it is let go.
const BACKLOG: usize = 256;

/// The clients of the stream.
#[derive(Debug, Default)]
pub(super) struct Hub {
    clients: Mutex<Vec<(u64, SyncSender<Arc<str>>)>>,
    next: AtomicU64,
}

impl Hub {
    /// A place for a new client, or `None` when [`MAX_CLIENTS`] are connected (those that
    /// left are found by a ping first).
    pub(super) fn join(&self) -> Option<Ticket> {
        if self.count() >= MAX_CLIENTS {
            self.send(&Arc::from(": ping\n\n"));
            // A client gone is noticed by its thread when the ping cannot be written.
            let deadline = std::time::Instant::now() + Duration::from_millis(500);
            while self.count() >= MAX_CLIENTS && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() >= MAX_CLIENTS {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = sync_channel(BACKLOG);
        clients.push((id, tx));
        Some(Ticket { id, rx })
    }

    fn leave(&self, id: u64) {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(c, _)| *c != id);
    }

    fn count(&self) -> usize {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Sends `event` (a whole SSE event) to every client; one too slow to keep up is let go.
    fn send(&self, event: &Arc<str>) {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(_, tx)| match tx.try_send(Arc::clone(event)) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            });
    }

    /// Loop `id`'s view changed (its `event: loop`) or it is gone (`None`): sent to the
    /// clients when `announce`.
    fn changed(&self, id: &str, view: Option<Arc<str>>, announce: bool) {
        if !announce {
            return;
        }
        let sent =
            view.unwrap_or_else(|| event("gone", &view::json(&serde_json::json!({ "id": id }))));
        self.send(&sent);
    }

    /// Serves the client of `ticket` on `out` (the raw connection) until it leaves: the
    /// response's head, then each event as it comes.
    pub(super) fn stream(&self, ticket: &Ticket, mut out: Box<dyn Write + Send>) {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: \
                    no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n\
                    retry: 2000\n\n";
        if out
            .write_all(head.as_bytes())
            .and_then(|()| out.flush())
            .is_ok()
        {
            while let Ok(event) = ticket.rx.recv() {
                if out
                    .write_all(event.as_bytes())
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    break;
                }
            }
        }
        self.leave(ticket.id);
    }
}

/// A client's place in the stream.
#[derive(Debug)]
pub(super) struct Ticket {
    id: u64,
    rx: Receiver<Arc<str>>,
}

/// One SSE event: its name and its data (one line of JSON).
fn event(name: &str, data: &str) -> Arc<str> {
    Arc::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// Watches the loops, and starts the thread that tells `hub`'s clients what changed. Returns
/// once every loop is read and watched (a change from then on is sent), with how many there
/// are.
pub(super) fn start(here: PathBuf, hub: Arc<Hub>) -> usize {
    let watching = Watching::begin(&here, &hub);
    let loops = watching.seen.views.len();
    std::thread::spawn(move || watching.run(&here, &hub));
    loops
}

/// What the watcher has seen of the loops: their files, and each one's view as last sent.
#[derive(Default)]
struct Seen {
    views: BTreeMap<String, String>,
    files: BTreeMap<String, PathBuf>,
    dirs: BTreeSet<PathBuf>,
}

/// The watcher and what it has seen, between [`start`] and its thread.
struct Watching {
    watcher: Option<notify::RecommendedWatcher>,
    rx: Receiver<Option<PathBuf>>,
    user_dir: Option<PathBuf>,
    seen: Seen,
}

impl Watching {
    fn begin(here: &Path, hub: &Hub) -> Self {
        let (tx, rx) = channel::<Option<PathBuf>>();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            match res {
                // A rescan (an overflowed queue): every loop is looked at again.
                Ok(e) if e.need_rescan() => {
                    let _ = tx.send(None);
                }
                // A file opened or read (by this server too, as it reads the loops) is no
                // change; a file closed after a write is.
                Ok(e) if matches!(e.kind, EventKind::Access(a) if a != AccessKind::Close(AccessMode::Write)) =>
                    {}
                Ok(e) => {
                    for p in e.paths {
                        let _ = tx.send(Some(p));
                    }
                }
                Err(_) => {
                    let _ = tx.send(None);
                }
            }
        });
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                crate::errln!(
                    "loop serve: cannot watch the loops' files ({e}); looking at them every {}s \
                     instead",
                    POLL.as_secs()
                );
                None
            }
        };
        let mut w = Self {
            watcher,
            rx,
            user_dir: crate::dirs::user_state_dir().ok(),
            seen: Seen::default(),
        };
        if let Some(u) = w.user_dir.clone() {
            // Where `loops`, the runner registry and the daemon's loops are noted; made if
            // need be, so that the first loop of this user is seen when it starts.
            let _ = std::fs::create_dir_all(u.join("runners"));
            w.watch_dir(&u);
            w.watch_dir(&u.join("runners"));
        }
        // Watched before they are read: a change in between is sent, not lost.
        for f in view::files(here) {
            w.watch_dir(Layout::of(&f).state_dir());
        }
        refresh_all(here, hub, &mut w.seen, false);
        for d in w.seen.dirs.clone() {
            w.watch_dir(&d);
        }
        w
    }

    fn watch_dir(&mut self, dir: &Path) {
        if let Some(w) = self.watcher.as_mut() {
            let _ = w.watch(dir, RecursiveMode::NonRecursive);
        }
    }

    fn run(mut self, here: &Path, hub: &Hub) {
        loop {
            let first = if self.watcher.is_some() {
                match self.rx.recv() {
                    Ok(p) => p,
                    Err(_) => return,
                }
            } else {
                std::thread::sleep(POLL);
                None
            };
            let mut paths = vec![first];
            // What comes with it (without a watcher, nothing: its sender is gone).
            while let Ok(p) = self.rx.recv_timeout(GATHER) {
                paths.push(p);
            }
            let everything = paths.iter().any(|p| match p {
                None => true,
                Some(p) => self.user_dir.as_ref().is_some_and(|u| p.starts_with(u)),
            });
            let before = self.seen.dirs.clone();
            if everything {
                refresh_all(here, hub, &mut self.seen, true);
            } else {
                let dirs: BTreeSet<PathBuf> = paths
                    .iter()
                    .flatten()
                    .filter_map(|p| p.parent().map(Path::to_path_buf))
                    .collect();
                refresh_some(hub, &mut self.seen, &dirs);
            }
            for d in self
                .seen
                .dirs
                .difference(&before)
                .cloned()
                .collect::<Vec<_>>()
            {
                self.watch_dir(&d);
            }
        }
    }
}

/// Reads every loop again; sends those that changed (all, when `announce`), and those gone.
fn refresh_all(here: &Path, hub: &Hub, seen: &mut Seen, announce: bool) {
    let now = view::all(here);
    let ids: BTreeSet<String> = now.iter().map(|v| v.id.clone()).collect();
    let gone: Vec<String> = seen
        .views
        .keys()
        .filter(|id| !ids.contains(*id))
        .cloned()
        .collect();
    for id in gone {
        seen.views.remove(&id);
        seen.files.remove(&id);
        hub.changed(&id, None, announce);
    }
    for v in now {
        let file = PathBuf::from(&v.file);
        seen.dirs
            .insert(Layout::of(&file).state_dir().to_path_buf());
        seen.files.insert(v.id.clone(), file);
        note(hub, seen, &v, announce);
    }
}

/// Reads again the loops whose state directory is one of `dirs`.
fn refresh_some(hub: &Hub, seen: &mut Seen, dirs: &BTreeSet<PathBuf>) {
    let files: Vec<PathBuf> = seen
        .files
        .values()
        .filter(|f| dirs.contains(Layout::of(f).state_dir()))
        .cloned()
        .collect();
    for f in files {
        if let Some(v) = view::one(&f) {
            note(hub, seen, &v, true);
        } else {
            let id = view::id_of(&f);
            seen.views.remove(&id);
            seen.files.remove(&id);
            hub.changed(&id, None, true);
        }
    }
}

/// Keeps `v` as the loop's last view, and sends it when it differs from the one before.
fn note(hub: &Hub, seen: &mut Seen, v: &view::LoopView, announce: bool) {
    let text = view::json(v);
    if seen.views.get(&v.id) == Some(&text) {
        return;
    }
    hub.changed(&v.id, Some(event("loop", &text)), announce);
    seen.views.insert(v.id.clone(), text);
}
