//! Shell completions and the manual page, generated from the command line's own definition:
//! every command a person may type, and none of the internal ones a runner starts.

use crate::support::{TestLoop, code, stdout};

/// The commands a person types (not the internal `__…` ones).
const PUBLIC: &[&str] = &[
    "start",
    "resume",
    "retry",
    "status",
    "gates",
    "answer",
    "stop",
    "doctor",
    "telegram",
    "daemon",
    "service",
    "completions",
    "man",
];

/// The commands a runner starts, never a person.
const INTERNAL: &[&str] = &["__starter", "__supervise", "__deliver", "__revive"];

#[test]
fn completions_are_printed_for_each_shell_with_every_command_and_no_internal_one() {
    let env = TestLoop::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = env.run(&["completions", shell]);
        let text = stdout(&out);
        assert_eq!(code(&out), 0, "{shell}: {text}");
        for c in PUBLIC {
            assert!(text.contains(c), "{shell}: no `{c}` in\n{text}");
        }
        for internal in INTERNAL {
            assert!(!text.contains(internal), "{shell}: {internal} is offered");
        }
    }
    let out = env.run(&["completions", "tcsh"]);
    assert_eq!(code(&out), 2, "a shell it cannot complete in is bad input");
}

#[test]
fn the_man_page_is_roff_naming_every_command_and_no_internal_one() {
    let env = TestLoop::new();
    let out = env.run(&["man"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(
        text.starts_with(".ie") || text.contains(".TH loop"),
        "{text}"
    );
    for c in PUBLIC {
        assert!(text.contains(c), "no `{c}` in the man page");
    }
    assert!(
        !text.contains("__"),
        "an internal command is in the man page"
    );
    assert!(
        text.contains("LOOP_FILE"),
        "the environment is in the man page"
    );
}

/// `man loop` showed the kernel's `loop(4)`: the page went where `man` does not look, and it
/// named `loop-start(1)` and others that did not exist. `loop man --install` writes every page
/// it names beside the binary, where `man` looks for the programs of `PATH`, and says whether
/// `man loop` finds it.
#[test]
fn loop_man_install_writes_every_page_it_names_where_man_finds_it() {
    let temp = crate::support::Temp::new();
    let bin = temp.join("prefix/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(crate::support::LOOP, bin.join("loop")).unwrap();
    let mut path = vec![bin.clone()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(path).unwrap();
    let out = crate::support::run(
        std::process::Command::new(bin.join("loop"))
            .args(["man", "--install"])
            .env("PATH", &path)
            .env("HOME", temp.join("home"))
            .env_remove("MANPATH"),
    );
    assert!(out.status.success(), "{out:?}");
    let said = crate::support::stdout(&out);
    let pages = temp.join("prefix/share/man/man1");
    let main = std::fs::read_to_string(pages.join("loop.1")).unwrap();
    let named: Vec<&str> = main
        .split("loop\\-")
        .skip(1)
        .filter_map(|rest| rest.split_once("(1)").map(|(name, _)| name))
        .filter(|name| {
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c == '\\' || c == '-')
        })
        .collect();
    assert!(named.contains(&"start"), "{main}");
    for name in named {
        let page = pages.join(format!("loop-{}.1", name.replace("\\-", "-")));
        assert!(
            page.exists(),
            "loop.1 names {} but it is not there",
            page.display()
        );
    }
    let man_here = std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if man_here {
        assert!(said.contains("`man loop` shows it"), "{said}");
    } else {
        println!("skipped: whether `man loop` finds the page: no `man` here");
    }
}

/// Bash completion was not loaded without the `bash-completion` package, and nothing said so:
/// `--install` writes them where bash-completion looks, and says what to add where it is not.
#[test]
fn loop_completions_install_writes_where_the_shell_loads_them_and_says_what_else_it_needs() {
    let temp = crate::support::Temp::new();
    let home = temp.join("home");
    for (shell, file) in [
        ("bash", "home/.local/share/bash-completion/completions/loop"),
        ("fish", "home/.config/fish/completions/loop.fish"),
        ("zsh", "home/.zfunc/_loop"),
    ] {
        let out = crate::support::run(
            std::process::Command::new(crate::support::LOOP)
                .args(["completions", shell, "--install"])
                .env("HOME", &home)
                .env_remove("XDG_DATA_HOME"),
        );
        assert!(out.status.success(), "{shell}: {out:?}");
        let written = std::fs::read_to_string(temp.join(file)).unwrap();
        assert!(written.contains("start"), "{shell}: {written}");
        let said = crate::support::stdout(&out);
        assert!(
            said.contains(&format!("wrote {}", temp.join(file).display())),
            "{said}"
        );
        if shell == "bash" {
            let package = std::path::Path::new("/usr/share/bash-completion/bash_completion")
                .exists()
                || std::path::Path::new("/etc/bash_completion").exists();
            assert_eq!(
                said.contains("add `source"),
                !package,
                "where the package is missing, the line to add is said: {said}"
            );
        }
    }
}
