//! Best-effort output. `loop status | head -1` or a closed terminal closes our stdout; Rust
//! ignores SIGPIPE, so a write then fails with EPIPE, and `println!` would panic on it (exit
//! 101), which in a runner leaves the loop RUNNING with nobody driving it. What `loop` prints
//! is a courtesy, never a reason to stop: these macros write and ignore any failure. The
//! record that matters is M1.md and the decision log, which are files.
//!
//! Much of what `loop` prints came from outside it: an agent's answer, a plan's step, a
//! reviewer's verdict, a line of `loop.log`. These macros are the one way out to a terminal,
//! so they show every control character and bidirectional override as an escape
//! ([`crate::text::shown`]): no text printed can write the clipboard, retitle the window,
//! clear the screen or write over a line.

/// `println!` that ignores a closed or failing stdout.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let text = ::std::format!($($arg)*);
        let _ = ::std::writeln!(::std::io::stdout().lock(), "{}", $crate::text::shown(&text));
    }};
}

/// `print!` that ignores a closed or failing stdout.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let text = ::std::format!($($arg)*);
        let _ = ::std::write!(::std::io::stdout().lock(), "{}", $crate::text::shown(&text));
    }};
}

/// `eprintln!` that ignores a closed or failing stderr.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let text = ::std::format!($($arg)*);
        let _ = ::std::writeln!(::std::io::stderr().lock(), "{}", $crate::text::shown(&text));
    }};
}
