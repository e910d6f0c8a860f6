//! Parsing then rendering an accepted M1.md gives back the identical bytes, and every value
//! reads back as written, whatever mix of keys, prose, comments, quotes, scripts and line
//! endings the file has.

use m1loop::m1::{Document, value};
use proptest::prelude::*;

use crate::support::SEED;

#[test]
fn seed_example_renders_byte_identical() {
    let doc = Document::parse(SEED).expect("the seed's example is valid");
    assert_eq!(doc.render(), SEED);
    assert_eq!(
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/M1.md")).unwrap(),
        SEED,
        "examples/M1.md is the seed's example"
    );
}

#[test]
fn seed_example_with_crlf_and_no_final_newline_renders_byte_identical() {
    let crlf = SEED.replace('\n', "\r\n");
    let cut = crlf.trim_end_matches("\r\n");
    for text in [crlf.as_str(), cut, SEED.trim_end_matches('\n')] {
        assert_eq!(Document::parse(text).unwrap().render(), text);
    }
}

/// Text that exercises quoting: spaces, ` #`, quotes, backslashes, Japanese, emoji.
fn text() -> impl Strategy<Value = String> {
    prop::string::string_regex(r#"[a-zA-Z0-9 #"\\/→.,:\[\]日本語バグ修正完了🚀✅-]{0,16}"#).unwrap()
}

fn comment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        (1usize..12, text()).prop_map(|(pad, c)| format!("{}# {c}", " ".repeat(pad))),
    ]
}

/// A scalar as written (quoted when needed, or by choice) and what it must read back as.
fn scalar() -> impl Strategy<Value = (String, String)> {
    (text(), any::<bool>(), comment())
        .prop_map(|(v, force, c)| (format!("{}{c}", value::encode(&v, force)), v))
}

/// One piece of a document: its lines, and the (path, value) pairs it promises.
type Piece = (Vec<String>, Vec<(Vec<String>, String)>);

fn prose() -> impl Strategy<Value = Piece> {
    prop_oneof![
        Just(vec!["# 見出し Heading".to_string()]),
        Just(vec!["Some prose, with a colon: and 絵文字 🚀.".to_string()]),
        Just(vec![String::new()]),
        Just(vec![
            "- [ ] a task".to_string(),
            "  - nested item".to_string()
        ]),
        Just(vec![
            "```".to_string(),
            "STATUS: NOT_A_STATUS".to_string(),
            "  weird: indentation".to_string(),
            "```".to_string(),
        ]),
    ]
    .prop_map(|lines| (lines, Vec::new()))
}

fn top_scalar(key: &'static str) -> impl Strategy<Value = Piece> {
    // GOAL must say something; other keys may be empty (written `""`).
    let min = if key == "GOAL" { "修正" } else { "" };
    (scalar(), Just(min)).prop_map(move |((written, v), min)| {
        let (written, v) = if v.trim().is_empty() && !min.is_empty() {
            (min.to_string(), min.to_string())
        } else {
            (written, v)
        };
        (
            vec![format!("{key}: {written}")],
            vec![(vec![key.to_string()], v)],
        )
    })
}

fn plan() -> impl Strategy<Value = Piece> {
    prop::collection::vec((0usize..5, text(), comment()), 0..5)
        .prop_flat_map(|steps| {
            let n = steps.len();
            (Just(steps), 0..=n, any::<bool>())
        })
        .prop_map(|(steps, current, comment_inside)| {
            let states = ["PENDING", "RUNNING", "DONE", "FAILED", "SKIPPED"];
            let mut lines = vec![
                "PLAN:".to_string(),
                format!("  TOTAL_STEPS: {}", steps.len()),
                format!("  CURRENT_STEP: {current}"),
                "  STEPS:".to_string(),
            ];
            let mut promises = Vec::new();
            for (i, (s, t, c)) in steps.iter().enumerate() {
                // A step says what it does: an empty text is invalid (tested in `m1::validate`).
                let t = if t.trim().is_empty() {
                    "調査"
                } else {
                    t.as_str()
                };
                let v = format!("[{}] {t}", states[*s]);
                lines.push(format!("    {}: {}{c}", i + 1, value::encode(&v, false)));
                if comment_inside {
                    lines.push("      # a note about this step".to_string());
                }
                promises.push((vec!["PLAN".into(), "STEPS".into(), (i + 1).to_string()], v));
            }
            (lines, promises)
        })
}

fn block(key: &'static str, fields: &'static [&'static str]) -> impl Strategy<Value = Piece> {
    (
        prop::collection::vec(scalar(), fields.len()),
        prop::sample::subsequence(fields, 0..=fields.len()),
        any::<bool>(),
    )
        .prop_map(move |(vals, chosen, blank)| {
            let mut lines = vec![format!("{key}:")];
            let mut promises = Vec::new();
            for (f, (written, v)) in chosen.iter().zip(vals) {
                // Task ids have their own alphabet (tested in `m1::validate`).
                let (written, v) = if *f == "TASK_ID" {
                    let id: String = v.chars().filter(char::is_ascii_alphanumeric).collect();
                    let id = format!("task_{id}");
                    (id.clone(), id)
                } else {
                    (written, v)
                };
                lines.push(format!("  {f}: {written}"));
                if blank {
                    lines.push(String::new());
                }
                promises.push((vec![key.to_string(), (*f).to_string()], v));
            }
            (lines, promises)
        })
}

/// RESULTS for step `n`, or for the planning call (step 0) when the plan has fewer steps: a
/// result for a step the plan does not list means the plan was lost (tested in `m1::validate`).
fn results() -> impl Strategy<Value = (u32, (String, String), &'static str)> {
    (
        1u32..4,
        scalar(),
        prop_oneof![Just("0"), Just("(pending)"), Just("-1")],
    )
}

fn results_piece(n: u32, (written, v): (String, String), exit: &str) -> Piece {
    let lines = vec![
        "RESULTS:".to_string(),
        format!("  STEP_{n}:"),
        format!("    EXIT: {exit}"),
        format!("    SUMMARY: {written}"),
        "    VERIFIED: true".to_string(),
        "    UNKNOWN_FIELD: kept".to_string(),
    ];
    let p = vec![
        "RESULTS".to_string(),
        format!("STEP_{n}"),
        "SUMMARY".to_string(),
    ];
    (lines, vec![(p, v)])
}

/// A valid document: GOAL and STATUS plus a shuffled selection of distinct keys and prose.
fn document() -> impl Strategy<Value = (String, Vec<(Vec<String>, String)>)> {
    let pieces = (
        top_scalar("GOAL"),
        prop_oneof![
            Just("IDLE"),
            Just("RUNNING"),
            Just("WAITING"),
            Just("DONE"),
            Just("FAILED")
        ],
        prop::option::of(top_scalar("CONSTRAINTS")),
        prop::option::of(top_scalar("LAST_ACTION")),
        prop::option::of(top_scalar("MY_NOTE")),
        prop::option::of(plan()),
        prop::option::of(block(
            "CURRENT",
            &["TASK_ID", "SPAWN_TIME", "COMMAND", "OTHER"],
        )),
        prop::option::of(results()),
        prop::collection::vec(prose(), 0..4),
    );
    (pieces, any::<u64>(), 0u8..3, any::<bool>()).prop_map(
        |((goal, status, c, la, note, plan, cur, res, prose), shuffle, eol, final_nl)| {
            let mut items: Vec<Piece> = vec![goal];
            items.push((
                vec![format!("STATUS: {status}              # IDLE / RUNNING")],
                Vec::new(),
            ));
            let planned = plan.as_ref().map_or(0, |(_, promised)| promised.len());
            let res = res.map(|(n, scalar, exit)| {
                let n = if (n as usize) <= planned { n } else { 0 };
                results_piece(n, scalar, exit)
            });
            items.extend([c, la, note, plan, cur, res].into_iter().flatten());
            items.extend(prose);
            // Deterministic shuffle from the generated seed (keeps shrinking meaningful).
            let mut k = shuffle;
            for i in (1..items.len()).rev() {
                k = k
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                items.swap(i, (k >> 33) as usize % (i + 1));
            }
            let mut lines = Vec::new();
            let mut promises = Vec::new();
            for (l, p) in items {
                // Prose before an indented prose line must not be a key: keep blocks apart.
                lines.push(String::new());
                lines.extend(l);
                promises.extend(p);
            }
            let mut text = String::new();
            for (i, l) in lines.iter().enumerate() {
                text.push_str(l);
                let e = match eol {
                    0 => "\n",
                    1 => "\r\n",
                    _ => {
                        if i % 2 == 0 {
                            "\r\n"
                        } else {
                            "\n"
                        }
                    }
                };
                if i + 1 < lines.len() || final_nl {
                    text.push_str(e);
                }
            }
            (text, promises)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_documents_round_trip((text, promises) in document()) {
        let doc = Document::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n---\n{text}")))?;
        prop_assert_eq!(doc.render(), text.clone());
        for (path, v) in promises {
            let p: Vec<&str> = path.iter().map(String::as_str).collect();
            prop_assert_eq!(doc.get(&p), Some(v), "path {:?} in\n{}", path, text);
        }
    }

    /// Any text at all: parsing never panics, and whatever is accepted renders identically.
    #[test]
    fn accepted_soup_renders_identically(
        lines in prop::collection::vec(prop_oneof![
            Just("GOAL: g"), Just("STATUS: DONE"), Just("PLAN:"), Just("  STEPS:"),
            Just("    1: [DONE] x"), Just("  CURRENT_STEP: 1"), Just("  TOTAL_STEPS: 1"),
            Just("# heading"), Just(""), Just("  # c"), Just("   odd"), Just("X: \"q"),
            Just("CURRENT:"), Just("  TASK_ID: t # c"), Just("\tTAB: x"), Just("日本語"),
            Just("```"), Just("KEY:novalue"),
        ], 0..14),
        crlf in any::<bool>(),
        final_nl in any::<bool>(),
    ) {
        let eol = if crlf { "\r\n" } else { "\n" };
        let mut text = lines.join(eol);
        if final_nl { text.push_str(eol); }
        if let Ok(doc) = Document::parse(&text) {
            prop_assert_eq!(doc.render(), text);
        }
    }
}
