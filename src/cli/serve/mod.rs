//! `loop serve`: every loop of this user on this machine on one page in the browser, live,
//! with its gates decided by a click, and the JSON API the page uses.
//!
//! It is a view and a front end, never a second place where state lives: it reads M1.md and
//! the loops' files as `loop list` and `loop status` do ([`view`]), and decides through the
//! loop's own commands, run as the chat bot runs them ([`decide`]). So a click, a tap and a
//! shell answer make one decision between them, and a server killed at any moment loses
//! nothing and decides nothing twice. It waits on requests and on the loops' files
//! ([`events`]), with a thread a connection (`tiny_http`): no async runtime, no timer.

mod api;
mod auth;
mod decide;
mod events;
mod page;
mod view;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;

use crate::error::Error;
use crate::exit::Status;

/// Requests answered at once; more wait for the server's queue (a decision can take seconds:
/// `loop stop` waits for its runner).
const MAX_IN_FLIGHT: usize = 64;

/// `loop serve`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Where to listen (default: 127.0.0.1 on a free port). An address other than loopback
    /// needs --expose.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,
    /// Listen on --addr although it is not a loopback address: whoever reaches it with the
    /// token sees every loop of yours and decides for them, over plain HTTP.
    #[arg(long)]
    pub expose: bool,
}

/// What serving on a reachable address exposes, said when it is refused and when it is done.
fn exposure(addr: SocketAddr) -> String {
    format!(
        "{addr} is reachable from other machines: whoever reaches it with the token sees every \
         loop of yours (goals, logs, reports) and can decide their gates, stop, resume, retry \
         and skip them, over plain HTTP that anyone on the way can read"
    )
}

/// `loop serve`: listens, prints the page's address with its token (the first line), and
/// answers until it is killed.
///
/// # Errors
/// A non-loopback `--addr` without `--expose` (exit 2); an address it cannot listen on.
pub(crate) fn run(here: &Path, args: &ServeArgs) -> crate::error::Result<Status> {
    if !args.addr.ip().is_loopback() && !args.expose {
        return Err(Error::bad_input(format!(
            "not serving on {}: {}; give --expose to serve there all the same",
            args.addr,
            exposure(args.addr)
        )));
    }
    let server = tiny_http::Server::http(args.addr)
        .map_err(|e| anyhow::anyhow!("while listening on {}: {e}", args.addr))?;
    let bound = server
        .server_addr()
        .to_ip()
        .context("while asking the server its address")?;
    let here = std::path::absolute(here).unwrap_or_else(|_| here.to_path_buf());
    let program = std::env::current_exe().context("while finding the loop binary")?;
    let s = Arc::new(api::Server {
        here: here.clone(),
        gate: auth::Gate::new(bound),
        hub: Arc::new(events::Hub::default()),
        program: decide::Loop { program },
    });
    // Watching every loop before the address is out: a change from the first request on is
    // on the stream.
    let loops = events::start(here.clone(), Arc::clone(&s.hub));
    crate::outln!("http://{bound}/?token={}", s.gate.token());
    if !bound.ip().is_loopback() {
        crate::errln!("loop serve: {}", exposure(bound));
    }
    crate::errln!(
        "loop serve: {} loop(s) of this user; the page follows them as they change. It holds \
         no state: stop it at any time (Ctrl-C)",
        loops
    );
    let in_flight = Arc::new(AtomicUsize::new(0));
    for req in server.incoming_requests() {
        if in_flight.load(Ordering::Acquire) >= MAX_IN_FLIGHT {
            let _ = req.respond(
                tiny_http::Response::from_string("busy: too many requests at once")
                    .with_status_code(503),
            );
            continue;
        }
        in_flight.fetch_add(1, Ordering::AcqRel);
        let s = Arc::clone(&s);
        let in_flight = Arc::clone(&in_flight);
        std::thread::spawn(move || {
            api::handle(&s, req);
            in_flight.fetch_sub(1, Ordering::AcqRel);
        });
    }
    Ok(Status::Ok)
}
