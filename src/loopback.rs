//! One loopback HTTP server for fakes: the stand-in for the model APIs that `loop doctor` runs
//! an agent CLI against, and in the tests the fakes of Telegram's Bot API and of an OTLP
//! collector. It listens on a free port of 127.0.0.1 only, and hands each request, its body
//! read, to the fake's handler on a thread of its own, so a handler may block (a long poll, a
//! request held unanswered) without holding up the others.
//!
//! Built on `tiny_http`: synchronous, no async runtime, which is all a fake needs. What
//! `tiny_http` cannot do, a fake of a broken server needs: to see that a client gave up on a
//! request held open, and to close a connection without an answer. Both go through the
//! connection's socket, found by its two addresses in `/proc/net/tcp` (Linux, as the rest of
//! the loop).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running server; it stops taking requests when dropped.
pub struct Server {
    addr: SocketAddr,
    http: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Listens on a free loopback port and hands every request to `handle`.
    ///
    /// # Errors
    /// When no loopback port can be had.
    pub fn start(handle: impl Fn(Exchange) + Send + Sync + 'static) -> std::io::Result<Self> {
        let http = tiny_http::Server::http(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .map_err(std::io::Error::other)?;
        let addr = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| std::io::Error::other("the server has no IP address"))?;
        let http = Arc::new(http);
        let stop = Arc::new(AtomicBool::new(false));
        let handle = Arc::new(handle);
        let (h, st) = (http.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let Ok(request) = h.recv() else {
                    continue;
                };
                let (handle, st) = (handle.clone(), st.clone());
                std::thread::spawn(move || {
                    if let Some(exchange) = Exchange::read(request, addr, st) {
                        handle(exchange);
                    }
                });
            }
        });
        Ok(Self {
            addr,
            http,
            stop,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    #[must_use]
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.http.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request, read, and the means to answer it (or not).
pub struct Exchange {
    request: tiny_http::Request,
    /// The server's address and the client's: the connection, as `/proc/net/tcp` names it.
    ends: Option<(SocketAddr, SocketAddr)>,
    stop: Arc<AtomicBool>,
    pub method: String,
    /// The path with its query.
    pub path: String,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("method", &self.method)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Exchange {
    fn read(
        mut request: tiny_http::Request,
        server: SocketAddr,
        stop: Arc<AtomicBool>,
    ) -> Option<Self> {
        let mut body = Vec::new();
        request.as_reader().read_to_end(&mut body).ok()?;
        Some(Self {
            ends: request.remote_addr().map(|client| (server, *client)),
            method: request.method().as_str().to_owned(),
            path: request.url().to_owned(),
            stop,
            request,
            body,
        })
    }

    /// The value of header `name` (any case), if it was sent.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.request
            .headers()
            .iter()
            .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }

    /// The body as JSON; `null` when it is not.
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// Answers with `status`, a `Content-Type` of `content_type`, `headers` and `body`. A
    /// client that has gone is not told.
    pub fn respond(
        self,
        status: u16,
        content_type: &str,
        headers: &[(&str, &str)],
        body: impl Into<Vec<u8>>,
    ) {
        let mut response = tiny_http::Response::from_data(body).with_status_code(status);
        for (k, v) in std::iter::once(&("Content-Type", content_type)).chain(headers) {
            if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                response.add_header(h);
            }
        }
        let _ = self.request.respond(response);
    }

    /// Closes the connection without an answer, as a server that drops it does.
    pub fn hang_up(self) {
        if let Some(fd) = self
            .ends
            .and_then(|(s, c)| connection(s, c))
            .and_then(|c| own_fd(c.inode))
        {
            let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
        }
        // Its writer goes without a word: the connection is closed already.
        drop(self.request.into_writer());
    }

    /// Whether the client closed its end of the connection (it gave up waiting).
    #[must_use]
    pub fn client_gone(&self) -> bool {
        self.ends
            .and_then(|(s, c)| connection(s, c))
            .is_none_or(|c| c.state != ESTABLISHED)
    }

    /// Holds the request unanswered while `hold` says so, its connection open: `true` once
    /// `hold` lets go, `false` when the client gave up first or the server is stopping.
    #[must_use]
    pub fn hold_while(&self, hold: impl Fn() -> bool) -> bool {
        loop {
            if self.stop.load(Ordering::SeqCst) || self.client_gone() {
                return false;
            }
            if !hold() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A TCP connection's state in `/proc/net/tcp`: established, both ends open.
const ESTABLISHED: u8 = 0x01;

/// One line of `/proc/net/tcp`, as far as a fake needs it.
struct Connection {
    state: u8,
    inode: u64,
}

/// The connection from `local` to `remote`, as this process's network namespace lists it.
fn connection(local: SocketAddr, remote: SocketAddr) -> Option<Connection> {
    let name = |a: SocketAddr| match a {
        // The kernel prints the address as the bytes it holds, read as a native integer.
        SocketAddr::V4(v4) => Some(format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(v4.ip().octets()),
            v4.port()
        )),
        SocketAddr::V6(_) => None,
    };
    let (local, remote) = (name(local)?, name(remote)?);
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(1) == Some(&local.as_str()) && f.get(2) == Some(&remote.as_str())).then(|| {
            Some(Connection {
                state: u8::from_str_radix(f.get(3)?, 16).ok()?,
                inode: f.get(9)?.parse().ok()?,
            })
        })?
    })
}

/// This process's descriptor of the socket `inode`.
fn own_fd(inode: u64) -> Option<std::os::fd::RawFd> {
    let want = format!("socket:[{inode}]");
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .find_map(|e| {
            let to = std::fs::read_link(e.path()).ok()?;
            (to.as_os_str() == want.as_str())
                .then(|| e.file_name().to_str()?.parse().ok())
                .flatten()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};
    use std::net::TcpStream;
    use std::sync::Mutex;
    use std::time::Instant;

    fn exchange(server: &Server, request: &str) -> String {
        let mut conn = TcpStream::connect(server.addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn.write_all(request.as_bytes()).unwrap();
        let mut got = String::new();
        let _ = conn.read_to_string(&mut got);
        got
    }

    #[test]
    fn a_request_is_handed_over_with_its_body_and_answered() {
        let server = Server::start(|ex| {
            let said = format!("{} {} {}", ex.method, ex.path, ex.json()["a"]);
            let kind = ex.header("x-kind").unwrap_or_default().to_owned();
            ex.respond(201, &kind, &[("request-id", "r1")], said);
        })
        .unwrap();
        let got = exchange(
            &server,
            "POST /v1/x?q=1 HTTP/1.1\r\nHost: h\r\nX-Kind: text/plain\r\nContent-Length: 7\r\n\
             Connection: close\r\n\r\n{\"a\":1}",
        );
        assert!(got.starts_with("HTTP/1.1 201"), "{got}");
        assert!(got.contains("Content-Type: text/plain"), "{got}");
        assert!(got.contains("request-id: r1"), "{got}");
        assert!(got.ends_with("POST /v1/x?q=1 1"), "{got}");
    }

    #[test]
    fn a_hang_up_closes_the_connection_with_no_answer() {
        let server = Server::start(Exchange::hang_up).unwrap();
        let got = exchange(&server, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(got, "", "no answer, and the connection closed");
    }

    #[test]
    fn a_held_request_whose_client_gives_up_is_seen_gone() {
        let outcome = Arc::new(Mutex::new(None));
        let held = Arc::new(AtomicBool::new(false));
        let (o, h) = (outcome.clone(), held.clone());
        let server = Server::start(move |ex| {
            let answered = ex.hold_while(|| {
                h.store(true, Ordering::SeqCst);
                true
            });
            *o.lock().unwrap() = Some(answered);
        })
        .unwrap();
        let mut conn = TcpStream::connect(server.addr).unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let until = |done: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !done() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        until(&|| held.load(Ordering::SeqCst));
        assert!(
            held.load(Ordering::SeqCst),
            "the request reached the handler"
        );
        assert_eq!(
            *outcome.lock().unwrap(),
            None,
            "held while the client waits"
        );
        drop(conn);
        until(&|| outcome.lock().unwrap().is_some());
        assert_eq!(*outcome.lock().unwrap(), Some(false));
    }
}
