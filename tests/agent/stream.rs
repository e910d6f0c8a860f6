//! The stream-json reader gives the same summary however the bytes arrive, and survives cut
//! lines, garbage and CRLF without failing.

use m1loop::agent::{StreamReader, StreamSummary, read_stream_file};
use proptest::prelude::*;

use crate::support::{Temp, captures, stream, summary};

fn fixture(stem: &str) -> Vec<u8> {
    std::fs::read(captures().join(format!("{stem}.stdout.jsonl"))).unwrap()
}

/// The fields that matter, in a comparable form.
fn key(s: &StreamSummary) -> String {
    format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}|{}|{}",
        s.session_id,
        s.result.as_ref().map(|r| (
            &r.subtype,
            r.is_error,
            r.api_error_status,
            &r.result,
            &r.permission_denials
        )),
        s.unavailable_tools,
        s.rate_limit.as_ref().map(|r| (&r.status, r.resets_at)),
        s.last_assistant_text,
        s.events,
        s.garbage_lines
    )
}

#[test]
fn byte_by_byte_equals_all_at_once() {
    for stem in [
        "success",
        "usage-limit-429-five-hour",
        "error-max-turns",
        "auth-401-invalid-api-key",
        "tool-removed-by-deny-rule",
    ] {
        let bytes = fixture(stem);
        let mut r = StreamReader::new();
        for b in &bytes {
            r.feed(std::slice::from_ref(b));
        }
        assert_eq!(key(&r.finish()), key(&summary(&bytes)), "{stem}");
    }
}

#[test]
fn summary_grows_as_lines_complete() {
    let bytes = fixture("success");
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    let mut r = StreamReader::new();
    r.feed(lines[0]);
    assert_eq!(
        r.summary().session_id.as_deref(),
        Some("9d1f0722-d156-47e1-a326-bf472cd503f4")
    );
    assert!(r.summary().result.is_none());
    // Half of the result line: nothing yet, and nothing counted as garbage.
    r.feed(lines[1]);
    let (head, tail) = lines[2].split_at(lines[2].len() / 2);
    r.feed(head);
    assert!(r.summary().result.is_none());
    assert_eq!(r.summary().garbage_lines, 0);
    r.feed(tail);
    assert!(r.summary().result.as_ref().is_some_and(|r| !r.is_error));
    assert_eq!(r.summary().events, 3);
}

#[test]
fn garbage_and_cut_lines_are_counted_and_skipped() {
    let mut bytes = b"not json at all\n\xff\xfe binary\n[1,2,3]\n\n   \r\n".to_vec();
    bytes.extend(fixture("success"));
    // A kill cut the last line in the middle.
    bytes.extend_from_slice(br#"{"type":"assistant","message":{"content":[{"type":"te"#);
    let s = summary(&bytes);
    assert_eq!(s.garbage_lines, 4, "three bad lines and the cut one");
    assert_eq!(s.events, 3);
    assert_eq!(
        s.result.unwrap().result.as_deref(),
        Some("Hello from mock. n_messages=2")
    );
}

#[test]
fn crlf_and_missing_final_newline_are_fine() {
    let bytes = fixture("success");
    let text = String::from_utf8(bytes).unwrap();
    let crlf = text.trim_end().replace('\n', "\r\n");
    let s = summary(crlf.as_bytes());
    assert_eq!(s.garbage_lines, 0);
    assert!(s.result.is_some());
}

#[test]
fn the_last_result_and_rate_limit_event_win() {
    let stream = concat!(
        r#"{"type":"system","subtype":"init","session_id":"a"}"#,
        "\n",
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":100}}"#,
        "\n",
        r#"{"type":"result","subtype":"success","is_error":true,"result":"first","session_id":"a"}"#,
        "\n",
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":200}}"#,
        "\n",
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]}}"#,
        "\n",
        r#"{"type":"result","subtype":"success","is_error":false,"result":"second","session_id":"b","permission_denials":[{"tool_name":"Write"},{"tool_name":"Bash"}]}"#,
        "\n",
    );
    let s = summary(stream.as_bytes());
    let r = s.result.unwrap();
    assert_eq!(r.result.as_deref(), Some("second"));
    assert_eq!(r.permission_denials, ["Write", "Bash"]);
    assert_eq!(
        s.session_id.as_deref(),
        Some("b"),
        "the result's id is the one to resume"
    );
    let rl = s.rate_limit.unwrap();
    assert_eq!((rl.status.as_str(), rl.resets_at), ("allowed", Some(200)));
    assert_eq!(s.last_assistant_text, None, "a tool call has no text");
}

#[test]
fn an_over_long_line_is_dropped_without_holding_it() {
    let mut r = StreamReader::new();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..70 {
        r.feed(&chunk);
    }
    r.feed(b"\n");
    r.feed(&fixture("success"));
    let s = r.finish();
    assert_eq!(s.garbage_lines, 1);
    assert!(s.result.is_some());
}

#[test]
fn read_stream_file_reads_a_file_and_reports_a_missing_one() {
    let dir = Temp::new();
    let path = dir.path().join("out.jsonl");
    std::fs::write(&path, fixture("overloaded-529")).unwrap();
    let s = read_stream_file(&path).unwrap();
    assert_eq!(s.result.unwrap().api_error_status, Some(529));
    assert!(read_stream_file(&dir.path().join("missing")).is_err());
}

proptest! {
    // A failing case is kept beside this file, as it was while this file was a test crate of its
    // own: proptest's default looks for a lib.rs above the file and, finding tests/lib.rs, would
    // keep it under proptest-regressions/ at the top instead.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_chunking_gives_the_same_summary(cuts in proptest::collection::vec(0usize..7000, 0..20)) {
        let bytes = fixture("usage-limit-429-five-hour");
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut r = StreamReader::new();
        let mut at = 0;
        for c in cuts {
            r.feed(&bytes[at..c]);
            at = c;
        }
        r.feed(&bytes[at..]);
        prop_assert_eq!(key(&r.finish()), key(&summary(&bytes)));
    }
}

const RESULT: &str = r#"{"type":"result","subtype":"success","is_error":false,"result":"STEP_DONE: x","permission_denials":[]}"#;

#[test]
fn tools_the_cli_refused_in_a_tool_result_are_denials() {
    let s = stream(&[
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"mcp__db__query","input":{}},{"type":"tool_use","id":"t2","name":"Bash","input":{}}]}}"#,
        // Text blocks instead of a string; the name comes from the call.
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"<tool_use_error>Error: No such tool available: mcp__db__query</tool_use_error>"}]}]}}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":"Permission to use Bash with command rm -rf x has been denied."}]}}"#,
        // The same tool refused again is one denial.
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t9","is_error":true,"content":"<tool_use_error>Error: No such tool available: Bash. Bash exists but is not enabled in this context.</tool_use_error>"}]}}"#,
        RESULT,
    ]);
    assert_eq!(s.unavailable_tools, ["mcp__db__query", "Bash"]);
    assert_eq!(
        s.result.unwrap().permission_denials,
        ["mcp__db__query", "Bash"]
    );
}

#[test]
fn ordinary_tool_errors_and_quoted_words_are_not_denials() {
    let s = stream(&[
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":"Exit code 1\ngrep: No such tool available: Bash"}]}}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","is_error":true,"content":"<tool_use_error>File does not exist.</tool_use_error>"}]}}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"c","is_error":true,"content":"<tool_use_error>InputValidationError: Read failed</tool_use_error>"}]}}"#,
        // Not an error: a file that happens to hold the words.
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"d","content":"No such tool available: Bash"}]}}"#,
        RESULT,
    ]);
    assert!(s.unavailable_tools.is_empty());
    assert!(s.result.unwrap().permission_denials.is_empty());
}

#[test]
fn a_refusal_after_the_result_still_reaches_its_denials() {
    let s = stream(&[
        RESULT,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":"Claude requested permissions to use WebFetch, but you haven't granted it yet."}]}}"#,
    ]);
    // No call to name it: the name comes from the text.
    assert_eq!(s.result.unwrap().permission_denials, ["WebFetch"]);
}
