//! The live line of a foreground runner while a step runs: elapsed time, what the agent did
//! last (from its stream-json, which the runner reads when it wakes anyway: on task output, and
//! on a terminal once a second for the clock; a silent agent off a terminal wakes nothing), and what the loop has spent. On a
//! terminal it is one line rewritten in place; into a pipe or a file, a line each time the
//! activity changes.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::agent::StreamSummary;

/// How the live line is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    /// Not at all (`--quiet`, a detached runner, an embedding caller).
    #[default]
    Off,
    /// One line rewritten in place.
    Terminal,
    /// A line per change of activity.
    Lines,
}

impl Mode {
    /// The mode for this process's stdout: in place on a terminal, lines otherwise.
    #[must_use]
    pub(crate) fn for_stdout() -> Self {
        if std::io::stdout().is_terminal() {
            Self::Terminal
        } else {
            Self::Lines
        }
    }
}

/// The step being watched.
#[derive(Debug)]
struct Watched {
    label: String,
    started: Instant,
    spent_before: f64,
}

/// The live line's state.
#[derive(Debug)]
pub(super) struct Progress {
    mode: Mode,
    watched: Option<Watched>,
    /// The activity last printed (lines mode), so each is printed once.
    printed: Option<String>,
    /// The end of the wait last printed (lines mode), so each wait is printed once.
    waited: Option<chrono::DateTime<chrono::Utc>>,
    /// A line is on the terminal and must be cleared before other output.
    on_screen: std::cell::Cell<bool>,
}

impl Progress {
    #[must_use]
    pub(super) fn new(mode: Mode) -> Self {
        Self {
            mode,
            watched: None,
            printed: None,
            waited: None,
            on_screen: std::cell::Cell::new(false),
        }
    }

    /// Whether the line shows a clock that moves (on a terminal): the runner then wakes once
    /// a second to redraw it; otherwise the line changes only with the step's stream.
    #[must_use]
    pub(super) fn ticks(&self) -> bool {
        self.mode == Mode::Terminal
    }

    /// Starts showing a step. `elapsed` is how long its task has run already (a re-adopted
    /// step began before this runner); `spent_before` what the loop had spent.
    pub(super) fn begin(&mut self, label: String, elapsed: Duration, spent_before: f64) {
        if self.mode == Mode::Off {
            return;
        }
        self.watched = Some(Watched {
            label,
            started: Instant::now()
                .checked_sub(elapsed)
                .unwrap_or_else(Instant::now),
            spent_before,
        });
        self.printed = None;
    }

    /// Shows the line for what the step's stream said so far: rewritten on a terminal (so the
    /// clock moves), printed again elsewhere only when the activity changed.
    pub(super) fn update(&mut self, summary: &StreamSummary) {
        let Some(w) = self.watched.as_ref() else {
            return;
        };
        let activity = summary.last_activity.clone();
        let cost = w.spent_before + summary.cost_usd.unwrap_or(0.0);
        let line = render(&w.label, w.started.elapsed(), activity.as_deref(), cost);
        match self.mode {
            Mode::Off => {}
            Mode::Terminal => {
                write_out(&format!("\r\x1b[2K{line}"));
                self.on_screen.set(true);
            }
            Mode::Lines => {
                if activity.is_some() && activity != self.printed {
                    write_out(&format!("{line}\n"));
                    self.printed = activity;
                }
            }
        }
    }

    /// Shows a wait (a backoff, a usage limit) of `label` until `until`, and why: the time left
    /// counts down on a terminal (called at each of the runner's wakes, at least every
    /// second); into a pipe or a file, a line once per wait.
    pub(super) fn wait(&mut self, label: &str, until: chrono::DateTime<chrono::Utc>, reason: &str) {
        let left = (until - chrono::Utc::now()).to_std().unwrap_or_default();
        let line = render_wait(label, left, reason);
        match self.mode {
            Mode::Off => {}
            Mode::Terminal => {
                write_out(&format!("\r\x1b[2K{line}"));
                self.on_screen.set(true);
            }
            Mode::Lines => {
                if self.waited != Some(until) {
                    write_out(&format!("{line}\n"));
                    self.waited = Some(until);
                }
            }
        }
    }

    /// Stops watching (the step ended) and clears the terminal line.
    pub(super) fn end(&mut self) {
        self.clear();
        self.watched = None;
    }

    /// Clears the terminal line so that other output starts on a clean one.
    pub(super) fn clear(&self) {
        if self.on_screen.replace(false) {
            write_out("\r\x1b[2K");
        }
    }
}

/// `0:42`, `1:02:03`.
fn clock(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 {
        format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
    } else {
        format!("{}:{:02}", secs / 60, secs % 60)
    }
}

/// `  … step 2 waits 0:07 left · backoff after API Error: 529 Overloaded`
fn render_wait(label: &str, left: Duration, reason: &str) -> String {
    // Rounded up: a wait shown as 0:00 left would read as over.
    let left = Duration::from_secs(left.as_secs() + u64::from(left.subsec_nanos() > 0));
    format!(
        "  … {label} waits {} left · {}",
        clock(left),
        crate::text::one_line(reason, 80)
    )
}

/// `  … step 2 attempt 1 · 0:42 · Bash: cargo test · $0.31 spent`
fn render(label: &str, elapsed: Duration, activity: Option<&str>, cost: f64) -> String {
    let mut line = format!("  … {label} · {}", clock(elapsed));
    if let Some(a) = activity {
        line.push_str(" · ");
        line.push_str(&crate::text::one_line(a, 80));
    }
    if cost > 0.0 {
        let _ = write!(line, " · ${cost:.2} spent");
    }
    line
}

/// Writes and flushes, ignoring a closed stdout (see [`crate::output`]).
fn write_out(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_step_clock_activity_and_cost() {
        let l = render(
            "step 2 attempt 1",
            Duration::from_secs(42),
            Some("Bash: cargo test"),
            0.3141,
        );
        assert_eq!(
            l,
            "  … step 2 attempt 1 · 0:42 · Bash: cargo test · $0.31 spent"
        );
    }

    #[test]
    fn an_hour_shows_hours_and_nothing_unknown_is_shown() {
        let l = render("planning", Duration::from_secs(3723), None, 0.0);
        assert_eq!(l, "  … planning · 1:02:03");
    }

    #[test]
    fn a_wait_says_what_it_waits_for_and_the_time_left_rounded_up() {
        assert_eq!(
            render_wait(
                "step 2",
                Duration::from_millis(6_200),
                "backoff: overloaded"
            ),
            "  … step 2 waits 0:07 left · backoff: overloaded"
        );
    }

    #[test]
    fn a_long_activity_is_cut_to_one_short_line() {
        let long = "x".repeat(200);
        let l = render("step 1 attempt 1", Duration::ZERO, Some(&long), 0.0);
        assert!(l.chars().count() < 120, "{l}");
        assert!(l.ends_with('…'));
    }
}
