//! Who may use `loop serve`: whoever holds its token, from the address it is bound to.
//!
//! Every request must carry the token (the page's cookie, `Authorization: Bearer`, `?token=`
//! or the `X-Loop-CSRF` header), or it gets 401. A request whose `Host` is neither the bound
//! address nor `localhost` gets 403 first: a page of another site whose name was rebound to
//! 127.0.0.1 (DNS rebinding) names its own host. And every request that changes something is a
//! POST with the token in `X-Loop-CSRF`, a header that a form cannot send and that a page of
//! another origin can only send after a preflight this server never grants: the cookie alone
//! (which a browser sends with a form of any other site) decides nothing.

use std::net::{IpAddr, SocketAddr};

/// The header a state-changing request carries the token in.
pub(super) const CSRF_HEADER: &str = "X-Loop-CSRF";

/// What a request is allowed, or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// It carries the token, and if it changes something, in the CSRF header.
    Allowed,
    /// 401: no token, or not this one.
    NoToken,
    /// 403: its `Host` is not this server's (DNS rebinding).
    WrongHost,
    /// 403: it changes something without the token in [`CSRF_HEADER`], or comes from a page
    /// of another origin.
    NoCsrf,
}

/// What of a request the checks read.
#[derive(Debug, Default)]
pub(super) struct Seen<'a> {
    pub post: bool,
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub cookie: Option<&'a str>,
    pub authorization: Option<&'a str>,
    pub csrf: Option<&'a str>,
    /// The `token` of the query string.
    pub query_token: Option<&'a str>,
}

/// The secret of one `loop serve`, and the address it answers on.
#[derive(Debug, Clone)]
pub(super) struct Gate {
    token: String,
    bound: SocketAddr,
}

impl Gate {
    /// A new random token for a server bound to `bound`.
    pub(super) fn new(bound: SocketAddr) -> Self {
        // Two version-4 UUIDs: 244 random bits from the system's generator.
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        Self { token, bound }
    }

    #[cfg(test)]
    fn with_token(bound: SocketAddr, token: &str) -> Self {
        Self {
            token: token.to_owned(),
            bound,
        }
    }

    pub(super) fn token(&self) -> &str {
        &self.token
    }

    /// The cookie the page's token is kept in: one per port, since a browser keeps cookies per
    /// host, whatever the port, and two servers would otherwise overwrite each other's.
    pub(super) fn cookie_name(&self) -> String {
        format!("loop_serve_{}", self.bound.port())
    }

    /// The `Set-Cookie` value that hands the token to the page: not readable by script, sent
    /// back only to this host and never with a request another site starts.
    pub(super) fn set_cookie(&self) -> String {
        format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie_name(),
            self.token
        )
    }

    /// Whether `candidate` is the token, compared in a time that does not tell how much of it
    /// matched.
    pub(super) fn is_token(&self, candidate: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// What the request `r` is allowed.
    pub(super) fn check(&self, r: &Seen<'_>) -> Verdict {
        if !r.host.is_some_and(|h| self.is_our_host(h)) {
            return Verdict::WrongHost;
        }
        let from_cookie = r.cookie.and_then(|c| cookie_value(c, &self.cookie_name()));
        let bearer = r
            .authorization
            .and_then(|a| a.trim().strip_prefix("Bearer "))
            .map(str::trim);
        let carried = [from_cookie, bearer, r.csrf, r.query_token]
            .into_iter()
            .flatten()
            .any(|t| self.is_token(t));
        if !carried {
            return Verdict::NoToken;
        }
        if r.post {
            if !r.csrf.is_some_and(|t| self.is_token(t)) {
                return Verdict::NoCsrf;
            }
            // A browser names the page a request comes from; only this server's own may POST.
            if let Some(origin) = r.origin
                && !self.is_our_origin(origin)
            {
                return Verdict::NoCsrf;
            }
        }
        Verdict::Allowed
    }

    /// Whether `host` (a `Host` header: `name[:port]`) names this server: its port, and
    /// `localhost` or the address it is bound to. Bound to every address (`--expose` on
    /// 0.0.0.0), any address literal is this machine's; a name still is not, but `localhost`.
    fn is_our_host(&self, host: &str) -> bool {
        let (name, port) = split_host(host);
        if port != Some(self.bound.port()) {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        match name.parse::<IpAddr>() {
            Ok(ip) => ip == self.bound.ip() || self.bound.ip().is_unspecified(),
            Err(_) => false,
        }
    }

    /// Whether `origin` (`http://host:port`) is this server's own page.
    fn is_our_origin(&self, origin: &str) -> bool {
        origin
            .strip_prefix("http://")
            .is_some_and(|host| self.is_our_host(host))
    }
}

/// `name` and port of a `Host` header; an IPv6 literal in brackets loses them.
fn split_host(host: &str) -> (&str, Option<u16>) {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        let Some((ip, after)) = rest.split_once(']') else {
            return (host, None);
        };
        return (ip, after.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match host.rsplit_once(':') {
        Some((name, port)) => (name, port.parse().ok()),
        None => (host, None),
    }
}

/// The value of cookie `name` in a `Cookie` header.
fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == name).then(|| v.trim())
    })
}

/// The value of `key` in a query string (`a=1&token=…`), as given (a token needs no decoding).
pub(super) fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "0123456789abcdef";

    fn gate() -> Gate {
        Gate::with_token("127.0.0.1:8123".parse().unwrap(), T)
    }

    fn seen(host: &str) -> Seen<'_> {
        Seen {
            host: Some(host),
            ..Seen::default()
        }
    }

    #[test]
    fn a_request_without_the_token_is_refused_401() {
        let g = gate();
        assert_eq!(g.check(&seen("127.0.0.1:8123")), Verdict::NoToken);
        let wrong = Seen {
            query_token: Some("0123456789abcdeX"),
            ..seen("127.0.0.1:8123")
        };
        assert_eq!(g.check(&wrong), Verdict::NoToken);
        let short = Seen {
            query_token: Some("0123"),
            ..seen("127.0.0.1:8123")
        };
        assert_eq!(g.check(&short), Verdict::NoToken);
    }

    #[test]
    fn the_token_is_taken_from_the_cookie_the_bearer_header_or_the_query() {
        let g = gate();
        let cookie = format!("other=1; loop_serve_8123={T}");
        for r in [
            Seen {
                cookie: Some(&cookie),
                ..seen("localhost:8123")
            },
            Seen {
                authorization: Some("Bearer 0123456789abcdef"),
                ..seen("127.0.0.1:8123")
            },
            Seen {
                query_token: Some(T),
                ..seen("127.0.0.1:8123")
            },
        ] {
            assert_eq!(g.check(&r), Verdict::Allowed, "{r:?}");
        }
        // Another server's cookie is not this one's.
        let theirs = format!("loop_serve_9999={T}");
        let r = Seen {
            cookie: Some(&theirs),
            ..seen("127.0.0.1:8123")
        };
        assert_eq!(g.check(&r), Verdict::NoToken);
    }

    #[test]
    fn a_host_other_than_the_bound_address_or_localhost_is_refused_403() {
        let g = gate();
        for host in [
            "evil.example:8123",
            "127.0.0.1:8124",
            "127.0.0.2:8123",
            "127.0.0.1",
            "localhost.evil.example:8123",
        ] {
            let r = Seen {
                query_token: Some(T),
                ..seen(host)
            };
            assert_eq!(g.check(&r), Verdict::WrongHost, "{host}");
        }
        let none = Seen {
            query_token: Some(T),
            ..Seen::default()
        };
        assert_eq!(g.check(&none), Verdict::WrongHost);
        let v6 = Gate::with_token("[::1]:8123".parse().unwrap(), T);
        let r = Seen {
            query_token: Some(T),
            ..seen("[::1]:8123")
        };
        assert_eq!(v6.check(&r), Verdict::Allowed);
    }

    #[test]
    fn a_post_needs_the_token_in_its_csrf_header_and_no_foreign_origin() {
        let g = gate();
        let cookie = format!("loop_serve_8123={T}");
        let with_cookie = Seen {
            post: true,
            cookie: Some(&cookie),
            ..seen("127.0.0.1:8123")
        };
        assert_eq!(g.check(&with_cookie), Verdict::NoCsrf);
        let with_header = Seen {
            csrf: Some(T),
            ..with_cookie
        };
        assert_eq!(g.check(&with_header), Verdict::Allowed);
        let from_elsewhere = Seen {
            origin: Some("http://127.0.0.1:9999"),
            ..with_header
        };
        assert_eq!(g.check(&from_elsewhere), Verdict::NoCsrf);
        let from_here = Seen {
            origin: Some("http://localhost:8123"),
            ..from_elsewhere
        };
        assert_eq!(g.check(&from_here), Verdict::Allowed);
    }

    #[test]
    fn bound_to_every_address_any_address_literal_is_ours_but_no_other_name() {
        let g = Gate::with_token("0.0.0.0:8123".parse().unwrap(), T);
        let r = |host| Seen {
            query_token: Some(T),
            ..seen(host)
        };
        assert_eq!(g.check(&r("192.0.2.7:8123")), Verdict::Allowed);
        assert_eq!(g.check(&r("rebound.example:8123")), Verdict::WrongHost);
    }

    #[test]
    fn the_token_is_long_and_new_each_time() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let (a, b) = (Gate::new(addr), Gate::new(addr));
        assert_eq!(a.token().len(), 64);
        assert_ne!(a.token(), b.token());
    }
}
