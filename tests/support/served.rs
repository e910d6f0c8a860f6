//! [`Served`]: `loop serve` for a [`TestLoop`]'s user, and a plain HTTP/1.1 client over a
//! loopback socket that sends exactly the headers a test gives (a `Host` of its choosing, a
//! cookie, no token at all), which a full client would not.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Guard, TestLoop};

/// A running `loop serve`, killed when dropped.
pub struct Served {
    guard: Guard,
    pub addr: SocketAddr,
    pub token: String,
    /// The first line it printed.
    pub first_line: String,
}

/// An answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Served {
    /// `loop serve ARGS` as `env`'s user, once it has printed its address.
    #[track_caller]
    pub fn start(env: &TestLoop, args: &[&str]) -> Self {
        let mut cmd = env.cmd(&[&["serve"], args].concat());
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let guard = Guard::new(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut r = BufReader::new(out);
            let _ = r.read_line(&mut line);
            let _ = tx.send(line);
            // The rest, if any, so that it never blocks on a full pipe.
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let first_line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("loop serve prints its address within 30s")
            .trim()
            .to_owned();
        let (base, token) = first_line
            .split_once("/?token=")
            .unwrap_or_else(|| panic!("not an address with a token: {first_line:?}"));
        let addr = base.strip_prefix("http://").unwrap().parse().unwrap();
        Self {
            guard,
            addr,
            token: token.to_owned(),
            first_line: first_line.clone(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    pub fn kill9(&mut self) {
        self.guard.kill9();
    }

    /// `METHOD PATH` with exactly `headers` (and `Host: ADDR` unless they name one).
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        http(self.addr, method, path, headers, body)
    }

    /// `GET PATH` with the token as a bearer.
    pub fn get(&self, path: &str) -> Resp {
        let bearer = format!("Bearer {}", self.token);
        self.request("GET", path, &[("Authorization", &bearer)], "")
    }

    /// `POST PATH` with the token in `X-Loop-CSRF`, as the page sends it.
    pub fn post(&self, path: &str, body: &str) -> Resp {
        self.request(
            "POST",
            path,
            &[
                ("X-Loop-CSRF", &self.token),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    }

    /// The loop of `file` as `GET /api/loops` lists it.
    #[track_caller]
    pub fn loop_of(&self, file: &std::path::Path) -> Value {
        let listed = self.get("/api/loops").json();
        let want = std::fs::canonicalize(file).unwrap().display().to_string();
        listed["loops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["file"] == want.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{want} is not listed: {listed}"))
    }

    /// The live stream, opened.
    pub fn events(&self) -> Events {
        let mut s = TcpStream::connect(self.addr).unwrap();
        write!(
            s,
            "GET /api/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.addr, self.token
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut r = BufReader::new(s);
        let mut status = String::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while status.is_empty() && Instant::now() < deadline {
            let _ = r.read_line(&mut status);
        }
        assert!(status.contains(" 200 "), "the stream answered {status:?}");
        Events { r }
    }
}

/// The live stream of a [`Served`].
pub struct Events {
    r: BufReader<TcpStream>,
}

impl Events {
    /// The next event (its name and data) for which `want` holds, within `within`.
    pub fn next_where(
        &mut self,
        within: Duration,
        mut want: impl FnMut(&str, &str) -> bool,
    ) -> Option<(String, String)> {
        let deadline = Instant::now() + within;
        let (mut name, mut data) = (String::new(), String::new());
        let mut line = String::new();
        while Instant::now() < deadline {
            match self.r.read_line(&mut line) {
                Ok(0) => return None,
                Ok(_) if line.ends_with('\n') => {
                    let l = line.trim_end().to_owned();
                    line.clear();
                    if let Some(n) = l.strip_prefix("event: ") {
                        n.clone_into(&mut name);
                    } else if let Some(d) = l.strip_prefix("data: ") {
                        d.clone_into(&mut data);
                    } else if l.is_empty() && !name.is_empty() {
                        if want(&name, &data) {
                            return Some((name, data));
                        }
                        name.clear();
                        data.clear();
                    }
                }
                // A part of a line, or the read timed out: read on until the deadline.
                Ok(_) | Err(_) => {}
            }
        }
        None
    }
}

/// One request on a connection of its own, read to its end.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        let _ = write!(head, "Host: {addr}\r\n");
    }
    for (k, v) in headers {
        let _ = write!(head, "{k}: {v}\r\n");
    }
    let _ = write!(
        head,
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_owned(),
    }
}
