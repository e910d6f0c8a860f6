//! The agent's verdict and plan are read strictly: only the exact last line counts, and a plan
//! is a JSON list of non-empty strings.

use m1loop::agent::{Verdict, parse_plan, verdict, without_verdict};

#[test]
fn the_last_line_decides() {
    assert_eq!(
        verdict("Fixed the handler.\nSTEP_DONE: SIGTERM handled in ai-media.py"),
        Verdict::Done("SIGTERM handled in ai-media.py".into())
    );
    assert_eq!(
        verdict("Which file?\nSTEP_BLOCKED: may I touch media-commands.ts?\n\n  \n"),
        Verdict::Blocked("may I touch media-commands.ts?".into())
    );
    assert_eq!(
        verdict("STEP_FAILED: tests do not compile   "),
        Verdict::Failed("tests do not compile".into())
    );
}

#[test]
fn a_mention_in_prose_never_counts() {
    assert_eq!(
        verdict("I will print STEP_DONE: when finished.\nStill working on it."),
        Verdict::Missing
    );
    assert_eq!(
        verdict("Done. The line STEP_DONE: x is what you want"),
        Verdict::Missing
    );
    assert_eq!(
        verdict("STEP_DONE: all good\nBut then I broke it."),
        Verdict::Missing
    );
    // An earlier verdict line is overridden by a later one.
    assert_eq!(
        verdict("STEP_DONE: first try\nSTEP_FAILED: second thoughts"),
        Verdict::Failed("second thoughts".into())
    );
}

#[test]
fn the_form_is_exact() {
    for text in [
        "",
        "\n\n",
        "step_done: lower case",
        "STEP_DONE summary without colon",
        "STEP_DONE :space before colon",
        "STEP_DONE:",
        "STEP_DONE:   ",
        "STEP_FINISHED: not a verdict",
        "- STEP_DONE: in a list item",
        "> STEP_DONE: quoted",
    ] {
        assert_eq!(verdict(text), Verdict::Missing, "{text:?}");
    }
}

#[test]
fn markup_around_the_line_or_prefix_is_tolerated() {
    let done = Verdict::Done("tests pass".into());
    for text in [
        "**STEP_DONE: tests pass**",
        "**STEP_DONE:** tests pass",
        "`STEP_DONE: tests pass`",
        "STEP_DONE:tests pass",
        "  STEP_DONE: tests pass\t",
        "Summary\n```\nSTEP_DONE: tests pass\n```\n",
        "STEP_DONE: tests pass\r\n",
    ] {
        assert_eq!(verdict(text), done, "{text:?}");
    }
}

#[test]
fn a_bare_plan_or_a_fenced_one_anywhere_in_the_text() {
    let want = vec![
        "Investigate".to_owned(),
        "Fix".to_owned(),
        "Test".to_owned(),
    ];
    assert_eq!(
        parse_plan(r#"{"steps":["Investigate","Fix","Test"]}"#),
        Ok(want.clone())
    );
    assert_eq!(
        parse_plan(
            "Here is the plan:\n```json\n{\n  \"steps\": [\"Investigate\", \"Fix\", \"Test\"]\n}\n```\nGood luck."
        ),
        Ok(want.clone())
    );
    assert_eq!(
        parse_plan(
            r#"Plan {not json} then {"steps": [" Investigate ", "Fix", "Test"], "note": {"x": 1}}"#
        ),
        Ok(want.clone())
    );
    // An example first, the answer last: the last one wins.
    assert_eq!(
        parse_plan(
            r#"Format: {"steps": ["a", "b"]}. Answer: {"steps": ["Investigate", "Fix", "Test"]}"#
        ),
        Ok(want)
    );
}

#[test]
fn plan_texts_become_one_line_each() {
    assert_eq!(
        parse_plan(r#"{"steps": ["Fix\nthe   bug", "日本語のステップ → docs/a.md"]}"#),
        Ok(vec![
            "Fix the bug".to_owned(),
            "日本語のステップ → docs/a.md".to_owned()
        ])
    );
}

#[test]
fn bad_plans_say_what_is_wrong() {
    let err = |t: &str| parse_plan(t).unwrap_err();
    assert!(err("I could not make a plan.").contains("no JSON object with a \"steps\" list"));
    assert!(err(r#"{"plan": ["a"]}"#).contains("no JSON object with a \"steps\" list"));
    assert!(err(r#"{"steps": "do it"}"#).contains("must be a list of strings, but it is a string"));
    assert!(err(r#"{"steps": []}"#).contains("no steps"));
    assert!(err(r#"{"steps": ["a", 2]}"#).contains("step 2 must be a string, but it is a number"));
    assert!(err(r#"{"steps": ["a", "  "]}"#).contains("step 2 is empty"));
    assert!(err(r#"{"steps": ["a", "b""#).contains("no JSON object"));
}

#[test]
fn the_answer_without_its_verdict_is_what_a_person_reads() {
    assert_eq!(
        without_verdict("I tried.\nThe build fails.\nSTEP_FAILED: no build"),
        "I tried.\nThe build fails."
    );
    assert_eq!(without_verdict("no verdict here\n"), "no verdict here");
}
