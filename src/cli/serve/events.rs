//! The live stream of changes (`GET /api/events`, server-sent events): one `notify` watcher
//! on every loop's state directory and on the per-user directory where loops and runners are
//! noted. When something there changes, the loops it concerns are read again, and each whose
//! view changed is sent to every client as an `event: loop` with that view; a loop no longer
//! listed is sent as `event: gone`. Nothing wakes the server but these files and requests:
//! no timer, no poll (unless inotify cannot start, which it says).

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

/// Starts the thread that watches the loops and tells `hub`'s clients what changed.
pub(super) fn start(here: PathBuf, hub: Arc<Hub>) {
    std::thread::spawn(move || watch(&here, &hub));
}

/// What the watcher has seen of the loops: their files, and each one's view as last sent.
#[derive(Default)]
struct Seen {
    views: BTreeMap<String, String>,
    files: BTreeMap<String, PathBuf>,
    dirs: BTreeSet<PathBuf>,
}

fn watch(here: &Path, hub: &Hub) {
    let (tx, rx) = channel::<Option<PathBuf>>();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        match res {
            // A rescan (an overflowed queue): every loop is looked at again.
            Ok(e) if e.need_rescan() => {
                let _ = tx.send(None);
            }
            // A file opened or read (by this server too, as it reads the loops) is no change;
            // a file closed after a write is.
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
    let mut watcher = match watcher {
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
    let user_dir = crate::dirs::user_state_dir().ok();
    let mut seen = Seen::default();
    let watch_dir = |w: &mut Option<notify::RecommendedWatcher>, dir: &Path| {
        if let Some(w) = w.as_mut() {
            let _ = w.watch(dir, RecursiveMode::NonRecursive);
        }
    };
    if let Some(u) = &user_dir {
        // Where `loops`, the runner registry and the daemon's loops are noted; made if need
        // be, so that the first loop of this user is seen when it starts.
        let _ = std::fs::create_dir_all(u.join("runners"));
        watch_dir(&mut watcher, u);
        watch_dir(&mut watcher, &u.join("runners"));
    }
    refresh_all(here, hub, &mut seen, false);
    for d in &seen.dirs {
        watch_dir(&mut watcher, d);
    }
    loop {
        let first = if watcher.is_some() {
            match rx.recv() {
                Ok(p) => p,
                Err(_) => return,
            }
        } else {
            std::thread::sleep(POLL);
            None
        };
        let mut paths = vec![first];
        // What comes with it (without a watcher, nothing: its sender is gone).
        while let Ok(p) = rx.recv_timeout(GATHER) {
            paths.push(p);
        }
        let everything = paths.iter().any(|p| match p {
            None => true,
            Some(p) => user_dir.as_ref().is_some_and(|u| p.starts_with(u)),
        });
        let before = seen.dirs.clone();
        if everything {
            refresh_all(here, hub, &mut seen, true);
        } else {
            let dirs: BTreeSet<PathBuf> = paths
                .iter()
                .flatten()
                .filter_map(|p| p.parent().map(Path::to_path_buf))
                .collect();
            refresh_some(hub, &mut seen, &dirs);
        }
        for d in seen.dirs.difference(&before) {
            watch_dir(&mut watcher, d);
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
        if announce {
            hub.send(&event(
                "gone",
                &super::api::json(&serde_json::json!({ "id": id })),
            ));
        }
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
            hub.send(&event(
                "gone",
                &super::api::json(&serde_json::json!({ "id": id })),
            ));
        }
    }
}

/// Keeps `v` as the loop's last view, and sends it when it differs from the one before.
fn note(hub: &Hub, seen: &mut Seen, v: &view::LoopView, announce: bool) {
    let text = super::api::json(v);
    if seen.views.get(&v.id) == Some(&text) {
        return;
    }
    seen.views.insert(v.id.clone(), text.clone());
    if announce {
        hub.send(&event("loop", &text));
    }
}
