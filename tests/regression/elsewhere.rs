//! The tests that pin the same problems below the whole loop stay beside what they test: unit
//! tests in `src/`, and the tests of the stream reader against the real CLI's captures and of
//! the invocation in `tests/agent/`. They are listed here, with the commit that fixed each
//! problem, so that one place names every test of a fix; the test below holds the list to the
//! files (a test that moves or is renamed must be moved or renamed here too).
//!
//! - `src/m1/store.rs` `an_in_place_save_that_overlaps_the_runners_write_is_not_lost` (2eea45e):
//!   a save in place that overlapped the runner's write landed in the file the swap displaced
//!   and was lost.
//! - `src/m1/store.rs` `a_stale_save_made_while_no_store_watched_is_read_against_the_versions_one_knew`
//!   (1def073): see `saves`.
//! - `tests/agent/fixtures.rs` `a_resumed_run_costs_what_it_spent_not_the_session_s_total`
//!   (10530e7): see `runs`.
//! - `tests/agent/fixtures.rs` `a_context_is_measured_against_the_window_its_resume_will_have`
//!   (acff6ba): see `runs`.
//! - `src/engine/tests/sessions.rs` `a_resumed_session_too_long_for_its_window_goes_on_fresh_with_a_handoff_not_an_attempt`
//!   (acff6ba): see `runs`.
//! - `tests/agent/fixtures.rs` `an_auth_error_the_cli_is_still_retrying_is_read_from_its_api_retry_events`
//!   (94d022b): see `runs`.
//! - `src/agent/claude/stream.rs` `an_auth_error_the_api_then_answered_is_no_longer_failing` (94d022b):
//!   a retry the API then answered must not halt the loop.
//! - `src/engine/tests/mod.rs` `a_run_ended_while_the_cli_retried_a_refused_key_halts_and_costs_no_attempt`
//!   (94d022b): see `runs`.
//! - `tests/agent/fixtures.rs` `only_compactions_that_happened_are_counted` (94d022b): see
//!   `runs`.
//! - `tests/agent/fixtures.rs` `only_tools_flag_keeps_a_reviewer_from_tools_a_user_rule_allows`
//!   (777ef11): see `review`.
//! - `tests/agent/invocation.rs` `a_read_only_call_is_offered_reading_tools_alone_in_one_value_before_the_session_flag`
//!   (777ef11): see `review`.
//! - `src/engine/tests/review.rs` `a_review_that_changed_the_tree_approves_nothing_and_a_human_looks`
//!   (1bf0732): see `review`.
//! - `src/runner/tree.rs` `every_change_to_the_tree_is_named_and_the_state_directory_is_not_looked_at`
//!   (1bf0732): see `review`.
//! - `tests/agent/invocation.rs` `the_prompt_goes_whole_to_standard_input_never_into_an_argument`
//!   (07fe34d): see `inputs`.
//! - `src/bridge/fire.rs` `standard_input_from_a_file_and_from_a_text_at_once_is_refused`
//!   (07fe34d): see `inputs`.
//! - `src/named_file.rs` `what_is_not_a_regular_file_says_what_it_is` (33478a2): see `files`.
//! - `src/named_file.rs` `a_regular_file_is_read_whole_and_a_larger_one_refused` (33478a2): see
//!   `files`.
//! - `src/duration.rs` `a_duration_past_a_year_is_refused_not_cut_to_fit` (4c0b417): see
//!   `files`.
//! - `src/duration.rs` `a_number_without_its_unit_is_refused_with_the_units_it_could_mean`
//!   (dbe5467): see `inputs` and `files`.
//! - `src/runner/progress.rs` `a_wait_says_what_it_waits_for_and_the_time_left_rounded_up`
//!   (e66f08f): see `commands`.
//! - `src/cli/service.rs` `the_daemon_line_for_a_shell_carries_the_environment_quoted_as_needed`
//!   (20ff20f): see `commands`.

use std::path::Path;

/// The (file, test) pairs this module's documentation lists: the first two quoted words of
/// each item.
fn listed() -> Vec<(String, String)> {
    include_str!("elsewhere.rs")
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .filter_map(|l| l.strip_prefix("//! - "))
        .map(|item| {
            let mut quoted = item.split('`').skip(1).step_by(2);
            let (file, test) = (quoted.next().unwrap(), quoted.next().unwrap());
            (file.to_owned(), test.to_owned())
        })
        .collect()
}

#[test]
fn every_test_listed_is_where_the_list_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = listed();
    assert!(listed.len() > 20, "the list was misread: {listed:?}");
    for (file, test) in listed {
        let text = std::fs::read_to_string(root.join(&file))
            .unwrap_or_else(|e| panic!("{file}, listed for {test}: {e}"));
        assert!(
            text.contains(&format!("fn {test}(")),
            "{file} has no test {test}: move or rename it in tests/regression/elsewhere.rs too"
        );
    }
}
