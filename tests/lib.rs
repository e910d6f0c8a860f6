//! The integration tests, as one test binary: one build, one link, and one process whose
//! threads run every test. Each test file is a module declared here, by area; what they share
//! is in [`support`]. A new test file goes into its area's directory and gets a line below.
//!
//! All tests share one process, so none may change the process's environment, current
//! directory or signal handling: a test gives a child process what it needs (see
//! `notifier::events` for the one test that must set its own environment).

mod support;

mod agent {
    mod classify;
    mod fixtures;
    mod invocation;
    mod real_cli;
    mod stream;
    mod verdict;
}

mod bridge {
    mod cli;
    mod survival;
}

mod loops {
    mod after;
    mod agent_killed;
    mod backends;
    mod codex;
    mod commits;
    mod crash;
    mod denials;
    mod doctor;
    mod fallbacks;
    mod figures;
    mod find;
    mod full_disk;
    mod gates;
    mod gemini;
    mod github;
    mod hooks;
    mod list;
    mod lost;
    mod old_files;
    mod parallel;
    mod report;
    mod report_browser;
    mod report_files;
    mod retry;
    mod review;
    mod revive;
    mod run;
    mod sandbox;
    mod sandbox_root;
    mod sandbox_state;
    mod schedule;
    mod seams;
    mod serve;
    mod serve_browser;
    mod sessions;
    mod settings;
    mod stale_save;
    mod stop;
    mod telegram;
    mod toolchains;
    mod unix;
    mod visible;
}

mod m1 {
    mod edit;
    mod in_place;
    mod misread;
    mod roundtrip;
    mod status;
    mod store;
    mod validate;
}

mod notifier {
    mod bot;
    mod delivery;
    mod events;
    mod outbox_concurrency;
}

/// Tests that pin a problem someone met, each named after it, with the commit that fixed it
/// (and the issue, where the history names one) in its doc comment: what broke once must not
/// break again unseen. They hold the fixes from 1def073 (the stale save after a takeover) on;
/// `elsewhere` lists the unit tests and capture tests that pin the same problems beside their
/// code. Older tests named after a problem stay in their area (`loops::unix`, say).
mod regression {
    mod by_hand;
    mod chat;
    mod commands;
    mod completions;
    /// The README and the manual, held to the program.
    mod doc_examples;
    mod docs;
    mod elsewhere;
    mod files;
    mod inputs;
    mod messages;
    mod notifications;
    /// What the loop does outside the sandbox with what others control (issue 41).
    mod outside;
    mod parallel;
    /// Against the real Codex and Gemini CLIs, what both do alike, run per backend (skipped,
    /// saying so, where a CLI cannot be installed).
    mod real_backends;
    /// Against the real Claude Code CLI, installed from npm (skipped, saying so, where it
    /// cannot be).
    mod real_cli;
    /// Against the real Gemini CLI, installed from npm and run in a network namespace of its
    /// own (skipped, saying so, where it cannot be).
    mod real_gemini;
    mod review;
    mod runs;
    mod saves;
    mod traces;
    mod traces_off;
}

mod sim {
    mod calls;
    mod refusals;
}
