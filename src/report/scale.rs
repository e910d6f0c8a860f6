//! The timeline's time axis: times to x, piecewise. A stretch when nothing ran that takes
//! most of the loop's life (a night on a gate, a loop stopped until morning) gets a narrow,
//! marked slot instead of its share, so the runs around it stay readable; the ticks count the
//! time since the loop began.

use chrono::{DateTime, TimeDelta, Utc};
use maud::{Markup, html};

/// A coordinate as the pictures write it: to a tenth.
pub(super) fn tenths(v: f64) -> String {
    format!("{v:.1}")
}

/// The width of a squeezed stretch.
const BREAK: f64 = 40.0;
/// A stretch with nothing running is squeezed when it is longer than this share of the whole,
/// and than [`QUIET_MIN_S`].
const QUIET_SHARE: f64 = 0.3;
const QUIET_MIN_S: f64 = 60.0;
/// Tick steps, in seconds.
const STEPS: &[f64] = &[
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
    3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0,
];

/// One stretch of the axis: from `t0` (seconds since the start) to `t1`, drawn from `x0` to `x1`.
#[derive(Debug, Clone, Copy)]
struct Piece {
    t0: f64,
    t1: f64,
    x0: f64,
    x1: f64,
    squeezed: bool,
}

/// Times to x between `left` and `right`.
#[derive(Debug)]
pub(super) struct Scale {
    start: DateTime<Utc>,
    pieces: Vec<Piece>,
}

fn secs(d: TimeDelta) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "milliseconds of a loop's life")]
    let ms = d.num_milliseconds() as f64;
    ms / 1000.0
}

impl Scale {
    /// The axis from `start` to `end`, with `busy` the stretches when something ran.
    pub(super) fn new(
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        busy: &[(DateTime<Utc>, DateTime<Utc>)],
        left: f64,
        right: f64,
    ) -> Self {
        let total = secs(end - start).max(0.001);
        let mut spans: Vec<(f64, f64)> = busy
            .iter()
            .map(|(a, b)| {
                (
                    secs(*a - start).clamp(0.0, total),
                    secs(*b - start).clamp(0.0, total),
                )
            })
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        // The quiet stretches long enough to squeeze, in order.
        let mut quiet = Vec::new();
        let mut at = 0.0_f64;
        for (a, b) in spans.iter().copied().chain([(total, total)]) {
            if a - at > (QUIET_SHARE * total).max(QUIET_MIN_S) {
                quiet.push((at, a));
            }
            at = at.max(b);
        }
        let squeezed: f64 = quiet.iter().map(|(a, b)| b - a).sum();
        #[expect(clippy::cast_precision_loss, reason = "a few breaks")]
        let room = (right - left - BREAK * quiet.len() as f64).max(1.0);
        let per_s = room / (total - squeezed).max(0.001);
        let mut pieces = Vec::new();
        let (mut t, mut x) = (0.0, left);
        for (a, b) in quiet.iter().copied().chain([(total, total)]) {
            if a > t {
                let x1 = x + (a - t) * per_s;
                pieces.push(Piece {
                    t0: t,
                    t1: a,
                    x0: x,
                    x1,
                    squeezed: false,
                });
                x = x1;
            }
            if b > a {
                pieces.push(Piece {
                    t0: a,
                    t1: b,
                    x0: x,
                    x1: x + BREAK,
                    squeezed: true,
                });
                x += BREAK;
            }
            t = b;
        }
        if pieces.is_empty() {
            pieces.push(Piece {
                t0: 0.0,
                t1: total,
                x0: left,
                x1: right,
                squeezed: false,
            });
        }
        Self { start, pieces }
    }

    /// Where time `t` is drawn.
    pub(super) fn x(&self, t: DateTime<Utc>) -> f64 {
        self.x_at(secs(t - self.start))
    }

    fn x_at(&self, s: f64) -> f64 {
        let p = self
            .pieces
            .iter()
            .find(|p| s <= p.t1)
            .or(self.pieces.last())
            .expect("a scale has a piece");
        let s = s.clamp(p.t0, p.t1);
        let span = (p.t1 - p.t0).max(0.001);
        p.x0 + (s - p.t0) / span * (p.x1 - p.x0)
    }

    /// The ticks along the top, with their lines down to `bottom`, in the unsqueezed stretches.
    pub(super) fn axis(&self, top: f64, bottom: f64) -> Markup {
        let shown: f64 = self
            .pieces
            .iter()
            .filter(|p| !p.squeezed)
            .map(|p| p.t1 - p.t0)
            .sum();
        let step = STEPS
            .iter()
            .copied()
            .find(|s| shown / s <= 8.0)
            .unwrap_or(86400.0);
        let mut last_label = f64::MIN;
        let mut ticks = Vec::new();
        for p in self.pieces.iter().filter(|p| !p.squeezed) {
            let mut k = (p.t0 / step).ceil();
            while k * step <= p.t1 + 1e-9 {
                let x = self.x_at(k * step);
                if x - last_label >= 48.0 {
                    ticks.push((x, tick(k * step, step)));
                    last_label = x;
                }
                k += 1.0;
            }
        }
        html! {
            @for (x, label) in ticks {
                line.grid x1=(tenths(x)) y1=(tenths(top)) x2=(tenths(x)) y2=(tenths(bottom)) {}
                text.tick x=(tenths(x)) y=(tenths(top - 8.0)) { (label) }
            }
        }
    }

    /// Each squeezed stretch, marked across the lanes with how long it was.
    pub(super) fn breaks(&self, top: f64, bottom: f64) -> Markup {
        html! {
            @for p in self.pieces.iter().filter(|p| p.squeezed) {
                @let long =
                    crate::duration::human(std::time::Duration::from_secs_f64(p.t1 - p.t0));
                g.break {
                    title { (long) " with nothing running, drawn narrow" }
                    rect x=(tenths(p.x0 + 4.0)) y=(tenths(top)) width=(tenths(p.x1 - p.x0 - 8.0))
                        height=(tenths(bottom - top)) {}
                    text.tick x=(tenths(f64::midpoint(p.x0, p.x1))) y=(tenths(top - 8.0)) {
                        "⋯ " (long) " ⋯"
                    }
                }
            }
        }
    }
}

/// A tick's label: the time since the start, `0`, `1.5s`, `30s`, `2m`, `1m30s`, `3h`.
fn tick(s: f64, step: f64) -> String {
    if s == 0.0 {
        return "0".to_owned();
    }
    if step < 1.0 {
        return format!("{s:.1}s");
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "whole ticks"
    )]
    let s = s.round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec:02}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn a_night_with_nothing_running_is_drawn_narrow_and_the_runs_keep_their_width() {
        // Ten minutes of work, eight hours on a gate, ten minutes of work.
        let busy = [(at(0), at(600)), (at(600 + 28_800), at(1200 + 28_800))];
        let s = Scale::new(at(0), at(1200 + 28_800), &busy, 0.0, 1000.0);
        let first = s.x(at(600)) - s.x(at(0));
        let night = s.x(at(600 + 28_800)) - s.x(at(600));
        assert!((first - 480.0).abs() < 1.0, "{first}");
        assert!((night - BREAK).abs() < 1e-6, "{night}");
        assert!((s.x(at(1200 + 28_800)) - 1000.0).abs() < 1e-6);
        let marks = s.breaks(0.0, 10.0).into_string();
        assert!(marks.contains("⋯ 8h00m ⋯"), "{marks}");
    }

    #[test]
    fn a_busy_loop_is_drawn_to_scale_with_round_ticks() {
        let s = Scale::new(at(0), at(100), &[(at(0), at(100))], 100.0, 1100.0);
        assert!((s.x(at(50)) - 600.0).abs() < 1e-6);
        let axis = s.axis(20.0, 100.0).into_string();
        for label in [">0<", ">15s<", ">1m<", ">1m30s<"] {
            assert!(axis.contains(label), "{label} in {axis}");
        }
        assert_eq!(tick(7200.0, 3600.0), "2h");
        assert_eq!(tick(0.5, 0.1), "0.5s");
    }
}
