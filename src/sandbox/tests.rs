//! The sandbox's mounts and environment, as bubblewrap gets them.

use std::path::{Path, PathBuf};

use super::*;

fn policy(writable: bool) -> Policy {
    Policy {
        work_tree: "/p/project".into(),
        work_tree_writable: writable,
        state_dir: "/p/project/state".into(),
        state_writes: vec!["/p/project/state/tasks/task_1".into()],
        home: "/home/u".into(),
        paths: vec![("/home/u/.claude".into(), Access::Write)],
        programs: Vec::new(),
        env: kept_env(&["ANTHROPIC_*".to_owned()]),
        named_files: Vec::new(),
    }
}

/// Where a mount of `path` stands in `ms`, if it is there.
fn at(ms: &[Mount], m: &Mount) -> usize {
    ms.iter()
        .position(|x| x == m)
        .unwrap_or_else(|| panic!("{m:?} not in {ms:?}"))
}

#[test]
fn the_loops_state_is_read_only_over_a_writable_work_tree_but_the_runs_own_task_directory() {
    let ms = mounts(&policy(true));
    let tree = at(&ms, &Mount::Write("/p/project".into()));
    let state = at(&ms, &Mount::Read("/p/project/state".into()));
    let task = at(&ms, &Mount::Write("/p/project/state/tasks/task_1".into()));
    assert!(tree < state && state < task, "{ms:?}");
}

#[test]
fn planning_and_reviews_read_the_work_tree_only() {
    let ms = mounts(&policy(false));
    at(&ms, &Mount::Read("/p/project".into()));
    assert!(!ms.contains(&Mount::Write("/p/project".into())));
}

#[test]
fn home_is_empty_but_for_the_agents_own_state_and_nothing_else_of_the_person_is_there() {
    let ms = mounts(&policy(true));
    let home = at(&ms, &Mount::Empty("/home/u".into()));
    let claude = at(&ms, &Mount::Write("/home/u/.claude".into()));
    assert!(home < claude);
    let binds: Vec<PathBuf> = ms
        .iter()
        .filter_map(|m| match m {
            Mount::Read(p) | Mount::Write(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    // Every secret place (`.ssh`, `.aws`, `.gnupg`, `.netrc`, `.config/gh`, `.docker`, `.kube`
    // and the rest of the list).
    for secret in super::toolchains::SECRET {
        let p = Path::new("/home/u").join(secret);
        assert!(
            !binds.iter().any(|b| p.starts_with(b)),
            "{secret} is bound: {binds:?}"
        );
    }
    for place in ["/home", "/root", "/srv", "/mnt", "/var"] {
        assert!(!binds.contains(&PathBuf::from(place)), "{place} is bound");
    }
}

#[test]
fn a_recorded_command_says_whether_its_run_could_write_the_work_tree() {
    let run = |writable: bool| {
        confined(
            Path::new("/usr/bin/bwrap"),
            &policy(writable),
            &[
                "claude".into(),
                "--bind".into(),
                "/x".into(),
                "/p/project".into(),
            ],
        )
    };
    let (tree, state) = (Path::new("/p/project"), Path::new("/p/project/state"));
    // Its own task directory is writable, inside the tree but in the loop's state.
    assert!(kept_read_only(&run(false), tree, state));
    assert!(!kept_read_only(&run(true), tree, state));
    // A mount the run's command makes is no mount of the sandbox's.
    let unconfined: Vec<String> = run(false)
        .into_iter()
        .skip_while(|a| a != "--")
        .skip(1)
        .collect();
    assert!(!kept_read_only(&unconfined, tree, state));
    // A writable path inside the tree (a person's SANDBOX_WRITE) lets it write there.
    let mut inside = policy(false);
    inside.paths.push(("/p/project/out".into(), Access::Write));
    let args = confined(Path::new("/usr/bin/bwrap"), &inside, &["claude".into()]);
    assert!(!kept_read_only(&args, tree, state));
}

#[test]
fn a_confined_command_runs_bwrap_in_the_work_tree_with_its_own_pid_namespace() {
    let args = confined(
        Path::new("/usr/bin/bwrap"),
        &policy(true),
        &["claude".into(), "-p".into()],
    );
    assert_eq!(args[0], "/usr/bin/bwrap");
    let dash = args.iter().position(|a| a == "--").unwrap();
    assert_eq!(&args[dash + 1..], ["claude", "-p"]);
    for flag in ["--unshare-pid", "--die-with-parent", "--unshare-user"] {
        assert!(args[..dash].contains(&flag.to_owned()), "{flag}: {args:?}");
    }
    // Root is nobody inside: every capability dropped, whoever runs the loop.
    assert!(
        args[..dash]
            .windows(2)
            .any(|w| w[0] == "--cap-drop" && w[1] == "ALL"),
        "{args:?}"
    );
    let chdir = args.iter().position(|a| a == "--chdir").unwrap();
    assert_eq!(args[chdir + 1], "/p/project");
    // The network stays: the agent must reach its API.
    assert!(!args.contains(&"--unshare-net".to_owned()));
}

#[test]
fn the_environment_is_an_allowlist_without_the_loops_credentials() {
    let keep = kept_env(&["ANTHROPIC_*".to_owned()]);
    let kept = |name: &str| crate::bridge::env_kept(&keep, name);
    assert!(kept("PATH") && kept("HOME") && kept("ANTHROPIC_API_KEY") && kept("LOOP_STEP"));
    for secret in [
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_CHAT_ID",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "SSH_AUTH_SOCK",
    ] {
        assert!(!kept(secret), "{secret} is kept");
    }
}

#[test]
fn an_npm_program_brings_its_node_modules_and_another_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir
        .path()
        .join("lib/node_modules/@anthropic-ai/claude-code");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("cli.js"), "").unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(pkg.join("cli.js"), bin.join("claude")).unwrap();
    let root = mounts::program_root(&bin.join("claude")).unwrap();
    assert_eq!(
        root,
        dir.path().join("lib/node_modules").canonicalize().unwrap()
    );
    std::fs::write(bin.join("tool"), "").unwrap();
    assert_eq!(
        mounts::program_root(&bin.join("tool")).unwrap(),
        bin.canonicalize().unwrap()
    );
}

/// The bench made the directory of the simulated agent's scenario readable
/// (`SANDBOX_READ`): mounted after the agent's own counts inside it, it hid them read-only,
/// and every call failed `Read-only file system`.
#[test]
fn a_path_inside_another_keeps_its_own_access_whatever_order_they_come_in() {
    let mut p = policy(true);
    p.paths = vec![
        ("/b/scenario.json.state".into(), Access::Write),
        ("/b".into(), Access::Read),
    ];
    let ms = mounts(&p);
    assert!(
        at(&ms, &Mount::Read("/b".into()))
            < at(&ms, &Mount::Write("/b/scenario.json.state".into()))
    );
}

/// An agent wrote `~/.claude/settings.json` with a `SessionStart` hook, which ran as the
/// person at their next `claude`: what would steer a later session is read-only over the
/// writable state, and what is missing is made as nothing first, so the run cannot create it.
#[test]
fn what_steers_a_later_session_is_read_only_over_the_state_and_made_as_nothing_when_missing() {
    use crate::agent::{Missing, OwnState};
    let home = tempfile::tempdir().unwrap();
    let claude = home.path().join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(claude.join("settings.json"), r#"{"theme":"mine"}"#).unwrap();
    let paths = own_state(OwnState {
        writes: vec![(claude.clone(), true)],
        steers: vec![
            (claude.join("settings.json"), Missing::File("{}")),
            (claude.join("settings.local.json"), Missing::File("{}")),
            (claude.join("hooks"), Missing::Dir),
            // In the run's empty home: nothing to make.
            (home.path().join(".claude.json"), Missing::File("{}")),
        ],
    });
    assert_eq!(
        std::fs::read_to_string(claude.join("settings.json")).unwrap(),
        r#"{"theme":"mine"}"#
    );
    assert_eq!(
        std::fs::read_to_string(claude.join("settings.local.json")).unwrap(),
        "{}"
    );
    assert!(claude.join("hooks").is_dir());
    assert!(!home.path().join(".claude.json").exists());
    let ms = mounts(&Policy {
        home: home.path().to_path_buf(),
        paths,
        ..policy(true)
    });
    let state = at(&ms, &Mount::Write(claude.clone()));
    for p in ["settings.json", "settings.local.json", "hooks"] {
        assert!(state < at(&ms, &Mount::Read(claude.join(p))), "{p}: {ms:?}");
    }
    assert!(!ms.contains(&Mount::Read(home.path().join(".claude.json"))));
}

/// A link among the read-only paths (a dotfiles manager's) is read where it leads; one a run
/// could have replaced to lead to a secret is not followed.
#[test]
fn a_read_only_link_is_followed_only_to_a_place_of_its_own_name() {
    use crate::agent::{Missing, OwnState};
    let home = tempfile::tempdir().unwrap();
    let (claude, dotfiles) = (home.path().join(".claude"), home.path().join("dotfiles"));
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(dotfiles.join("settings.json"), "{}").unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), "key").unwrap();
    std::os::unix::fs::symlink(dotfiles.join("settings.json"), claude.join("settings.json"))
        .unwrap();
    std::os::unix::fs::symlink(home.path().join(".ssh/id_rsa"), claude.join("CLAUDE.md")).unwrap();
    let paths = own_state(OwnState {
        writes: vec![(claude.clone(), true)],
        steers: vec![
            (claude.join("settings.json"), Missing::File("{}")),
            (claude.join("CLAUDE.md"), Missing::File("")),
        ],
    });
    let real = |p: &Path| std::fs::canonicalize(p).unwrap();
    assert!(paths.contains(&(real(&dotfiles.join("settings.json")), Access::Read)));
    assert!(
        !paths
            .iter()
            .any(|(p, _)| p.starts_with(real(&home.path().join(".ssh")))),
        "{paths:?}"
    );
}
