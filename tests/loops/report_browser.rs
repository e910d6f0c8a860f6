//! The report page in a real browser: headless Chromium renders the page of a loop the
//! simulated agent ran, takes a screenshot, and the screenshot must show the page (its
//! timeline's colours among many others), with no script error and nothing it failed to load.
//! Where Chromium is not installed (Debian: `apt-get install chromium`), the test says
//! `skipped:` and passes.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::output_within;

/// Chromium, where it is installed.
pub(super) fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Chromium headless with `args`, in a profile of its own under `temp`, ended with every
/// process it started.
fn headless(browser: &Path, temp: &Path, args: &[String]) -> Output {
    let child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            temp.join("profile").display()
        ))
        .args(args)
        .env("HOME", temp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("chromium starts");
    let group = nix::unistd::Pid::from_raw(child.id().cast_signed());
    let out = output_within(child, Duration::from_secs(120));
    // Its helpers (zygote, renderer) go with it, whatever happened.
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    out.expect("chromium ends within two minutes")
}

/// The problems the browser reported: a script error, or something it could not load.
fn problems(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            l.contains("Uncaught")
                || (l.contains("CONSOLE") && l.to_ascii_lowercase().contains("error"))
                || l.contains("net::ERR_")
                || l.contains("Refused to")
        })
        .collect()
}

#[test]
fn the_report_page_renders_in_a_real_browser_with_its_timeline_and_no_error() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: chromium not installed (the report page's browser test)");
        return;
    };
    let env = super::report::eventful_loop();
    let page = env.state().join("M1.report.html");
    let url = format!("file://{}", page.display());
    let shot = env.temp.join("report.png");
    let out = headless(
        &browser,
        &env.temp.join("chromium"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,900".to_owned(),
            url.clone(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && shot.is_file(), "{err}");
    assert!(problems(&err).is_empty(), "{:?}", problems(&err));

    let (width, height, pixels) = decode(&shot);
    assert_eq!((width, height), (1200, 900));
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    for p in pixels.chunks_exact(3) {
        colours.insert((p[0], p[1], p[2]));
        if p.iter().any(|c| *c < 235) {
            inked += 1;
        }
    }
    assert!(
        colours.len() > 200,
        "{} colours: a blank page",
        colours.len()
    );
    assert!(
        inked * 20 > pixels.len() / 3,
        "{inked} pixels inked: a blank page"
    );
    // The timeline's bars, drawn: a passed run's green and a failed one's red.
    let near = |want: (u8, u8, u8)| {
        colours.iter().any(|c| {
            [
                c.0.abs_diff(want.0),
                c.1.abs_diff(want.1),
                c.2.abs_diff(want.2),
            ]
            .iter()
            .all(|d| *d <= 3)
        })
    };
    assert!(near((0x2f, 0x9e, 0x5d)), "no passed run's green");
    assert!(near((0xd6, 0x45, 0x45)), "no failed run's red");

    // The page as the browser built it: the picture is in it.
    let dom = headless(
        &browser,
        &env.temp.join("chromium-dom"),
        &["--dump-dom".to_owned(), url],
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    assert!(
        html.contains("<svg class=\"timeline\"") && html.contains("k-attempt"),
        "{html}"
    );
    let err = String::from_utf8_lossy(&dom.stderr);
    assert!(problems(&err).is_empty(), "{:?}", problems(&err));
}

/// The screenshot's width, height and RGB bytes.
pub(super) fn decode(png_file: &Path) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::fs::File::open(png_file).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgb = match info.color_type {
        png::ColorType::Rgb => buf,
        png::ColorType::Rgba => buf
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
        other => panic!("a screenshot in {other:?}"),
    };
    (info.width, info.height, rgb)
}
