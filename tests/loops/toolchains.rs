//! The person's toolchains work inside the sandbox with nothing to configure: what their shell
//! finds under `$HOME` (a pyenv-style shim and the manager it calls, an npm prefix in nvm's
//! layout, rustup's cargo with its registry cache) runs the same in VERIFY as in their shell,
//! and `~/.ssh` stays unreadable all the same. Real processes, real `bwrap` (each test says
//! `skipped:` where it cannot run).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use claude_sim::scenario::{Action, Scenario};
use m1loop::m1::Status;

use super::sandbox::bwrap_here;
use crate::support::TestLoop;
use crate::support::answers::passing;

const SECRET: &str = "SECRET-KEY-of-the-person";

/// `env` whose `$HOME` is a home beside the project with `~/.ssh/id_test`, and that home.
fn with_home(env: TestLoop) -> (TestLoop, PathBuf) {
    let home = env.path().parent().unwrap().join("home");
    let key = home.join(".ssh/id_test");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(key, SECRET).unwrap();
    (env.env("HOME", &home), home)
}

fn script(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `PATH` with `dir` first.
fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// Runs a one-step loop whose VERIFY is `verify` (then prints `~/.ssh/id_test`, or why it
/// cannot, into `ssh.txt`), and says what VERIFY printed into `out.txt`.
fn verify_in(env: &TestLoop, verify: &str) -> String {
    env.scenario(&passing());
    let verify = format!(
        "{verify} > out.txt 2>&1; s=$?; cat \"$HOME/.ssh/id_test\" > ssh.txt 2>&1; exit $s"
    );
    env.run(&[
        "start",
        "g",
        "--step",
        "one",
        "--max-retries",
        "1",
        "--verify",
        &verify,
    ]);
    let out = std::fs::read_to_string(env.path().join("out.txt")).unwrap_or_default();
    let ssh = std::fs::read_to_string(env.path().join("ssh.txt")).unwrap_or_default();
    assert!(!ssh.contains(SECRET), "~/.ssh was readable: {ssh}");
    assert!(
        !ssh.is_empty(),
        "the read of ~/.ssh ran and said why it failed"
    );
    out
}

#[test]
fn a_pyenv_style_shim_under_home_runs_in_verify_with_no_flag() {
    if !bwrap_here("a pyenv-style shim …") {
        return;
    }
    let (env, home) = with_home(TestLoop::new());
    let root = home.join(".pyenv");
    // As pyenv's own: the shim runs the manager by its path under $HOME.
    script(
        &root.join("shims/python"),
        &format!(
            "#!/bin/sh\nexec \"{}/libexec/pyenv\" exec python \"$@\"\n",
            root.display()
        ),
    );
    script(
        &root.join("libexec/pyenv"),
        "#!/bin/sh\nshift; shift; echo \"python via pyenv: $*\"\n",
    );
    let env = env
        .env("PYENV_ROOT", &root)
        .env("PATH", path_with(&root.join("shims")));
    let out = verify_in(&env, "python -c ok");
    assert_eq!(out, "python via pyenv: -c ok\n");
    env.assert_status(Status::Done);
}

#[test]
fn an_npm_global_tool_in_nvms_layout_under_home_runs_in_verify_with_no_flag() {
    if !bwrap_here("an npm global tool in nvm's layout …") {
        return;
    }
    let (env, home) = with_home(TestLoop::new());
    let prefix = home.join(".nvm/versions/node/v20.0.0");
    // As npm installs a global package: its program is a link from bin/ into lib/node_modules/,
    // which needs the rest of the package beside it.
    let package = prefix.join("lib/node_modules/greet");
    script(
        &package.join("cli.sh"),
        "#!/bin/sh\nd=$(dirname \"$(readlink -f \"$0\")\"); cat \"$d/greeting.txt\"\n",
    );
    std::fs::write(package.join("greeting.txt"), "hello from nvm\n").unwrap();
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::os::unix::fs::symlink("../lib/node_modules/greet/cli.sh", prefix.join("bin/greet"))
        .unwrap();
    let env = env
        .env("NVM_DIR", home.join(".nvm"))
        .env("PATH", path_with(&prefix.join("bin")));
    assert_eq!(verify_in(&env, "greet"), "hello from nvm\n");
    env.assert_status(Status::Done);
}

#[test]
fn rustups_cargo_builds_a_crate_with_a_registry_dependency_offline_with_no_flag() {
    if !bwrap_here("rustup's cargo …") {
        return;
    }
    // The machine's own rustup and cargo home, as the person's shell finds them; the test's
    // home holds the key.
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let rustup =
        std::env::var_os("RUSTUP_HOME").map_or_else(|| real_home.join(".rustup"), PathBuf::from);
    let cargo_home =
        std::env::var_os("CARGO_HOME").map_or_else(|| real_home.join(".cargo"), PathBuf::from);
    let cargo = cargo_home.join("bin/cargo");
    if !rustup.is_dir() || !cargo.is_file() || !cargo_home.join("registry/cache").is_dir() {
        println!(
            "skipped: rustup's cargo …: no rustup with a registry cache here ({} , {})",
            rustup.display(),
            cargo_home.display()
        );
        return;
    }
    let (env, _home) = with_home(TestLoop::new().with_git());
    std::fs::write(
        env.path().join("Cargo.toml"),
        "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nanyhow = \"1\"\n",
    )
    .unwrap();
    std::fs::create_dir(env.path().join("src")).unwrap();
    std::fs::write(
        env.path().join("src/lib.rs"),
        "pub fn f() -> anyhow::Result<u8> { Ok(7) }\n#[test]\nfn seven() { assert_eq!(f().unwrap(), 7); }\n",
    )
    .unwrap();
    std::fs::write(env.path().join(".gitignore"), "target/\n").unwrap();
    let env = env
        .env("RUSTUP_HOME", &rustup)
        .env("CARGO_HOME", &cargo_home)
        .env("PATH", path_with(&cargo_home.join("bin")));
    let out = verify_in(&env, "cargo test --offline --quiet");
    assert!(out.contains("test result: ok. 1 passed"), "{out}");
    env.assert_status(Status::Done);
}

#[test]
fn a_granted_directory_that_holds_a_secret_place_shows_it_empty() {
    if !bwrap_here("a granted directory that holds a secret place …") {
        return;
    }
    let (env, home) = with_home(TestLoop::new());
    std::fs::write(home.join("notes.txt"), "the person's notes\n").unwrap();
    std::fs::write(home.join(".netrc"), SECRET).unwrap();
    env.scenario(&passing());
    let verify = "cat \"$HOME/notes.txt\" > out.txt; cat \"$HOME/.ssh/id_test\" \"$HOME/.netrc\" \
                  > ssh.txt 2>&1; true";
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "one",
        "--sandbox-read",
        "~",
        "--verify",
        verify,
    ]);
    env.assert_status(Status::Done);
    let read = |f: &str| std::fs::read_to_string(env.path().join(f)).unwrap();
    assert_eq!(
        read("out.txt"),
        "the person's notes\n",
        "the home was granted"
    );
    assert!(!read("ssh.txt").contains(SECRET), "{}", read("ssh.txt"));
}

#[test]
fn sandbox_read_on_the_command_line_adds_to_loop_yamls_list_instead_of_replacing_it() {
    if !bwrap_here("--sandbox-read adds to loop.yaml's list …") {
        return;
    }
    let env = TestLoop::new();
    let root = env.path().parent().unwrap().to_path_buf();
    for d in ["from-yaml", "from-flag"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
        std::fs::write(root.join(d).join("f.txt"), format!("{d}\n")).unwrap();
    }
    std::fs::write(
        env.state().join("loop.yaml"),
        format!(
            "agent:\n  sandbox_read: [{}]\n",
            root.join("from-yaml").display()
        ),
    )
    .unwrap();
    env.scenario(&passing());
    let verify = format!(
        "cat {0}/from-yaml/f.txt {0}/from-flag/f.txt > out.txt",
        root.display()
    );
    let flag = root.join("from-flag").display().to_string();
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "one",
        "--sandbox-read",
        &flag,
        "--verify",
        &verify,
    ]);
    env.assert_status(Status::Done);
    assert_eq!(
        std::fs::read_to_string(env.path().join("out.txt")).unwrap(),
        "from-yaml\nfrom-flag\n"
    );
    let text = env.text();
    assert!(
        text.contains("from-yaml") && text.contains("from-flag"),
        "{text}"
    );
    // `loop status` shows the whole list a run gets.
    let status = crate::support::stdout(&env.run_ok(&["status"]));
    let granted = status
        .lines()
        .find(|l| l.starts_with("GRANTED"))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(
        granted.contains("from-yaml") && granted.contains("from-flag"),
        "{granted}"
    );
}

#[test]
fn a_variable_named_by_sandbox_env_reaches_every_run_and_is_kept_in_m1() {
    if !bwrap_here("a variable named by --sandbox-env …") {
        return;
    }
    let env = TestLoop::new()
        .env("DATABASE_URL", "postgres://db.invalid/app")
        .env("APP_MODE", "test")
        .env("UNNAMED_VAR", "not for the run");
    env.scenario(&passing());
    let verify = "echo \"$DATABASE_URL $APP_MODE [$UNNAMED_VAR]\" > out.txt";
    env.run_ok(&[
        "start",
        "g",
        "--step",
        "one",
        "--sandbox-env",
        "DATABASE_URL",
        "--sandbox-env",
        "APP_*",
        "--verify",
        verify,
    ]);
    env.assert_status(Status::Done);
    assert_eq!(
        std::fs::read_to_string(env.path().join("out.txt")).unwrap(),
        "postgres://db.invalid/app test []\n"
    );
    assert!(
        env.text()
            .contains("SANDBOX_ENV: CLAUDE_SIM_*, DATABASE_URL, APP_*")
            || env
                .text()
                .contains("SANDBOX_ENV: DATABASE_URL, APP_*, CLAUDE_SIM_*"),
        "{}",
        env.text()
    );
}

#[test]
fn a_sandbox_env_that_is_not_a_variables_name_is_refused_and_says_why() {
    let env = TestLoop::new();
    let out = env.run(&["start", "g", "--step", "one", "--sandbox-env", "1BAD"]);
    env.assert_exit(&out, 2);
    let err = crate::support::stderr(&out);
    assert!(
        err.contains("`1BAD` is not the name of a variable"),
        "{err}"
    );
    assert!(!env.file.exists(), "no M1.md was written");
    assert!(env.calls().is_empty());
}

#[test]
fn a_verify_that_reaches_for_a_path_the_sandbox_hid_says_so_and_spends_no_more_attempts() {
    if !bwrap_here("a VERIFY that reaches for a hidden path …") {
        return;
    }
    let (env, home) = with_home(TestLoop::new());
    // A tool of the person's own, in a directory of their PATH, that runs a helper beside it:
    // no toolchain the sandbox knows.
    let tools = home.join("tools");
    script(
        &tools.join("bin/mytool"),
        &format!("#!/bin/sh\nexec {}/lib/helper \"$@\"\n", tools.display()),
    );
    script(&tools.join("lib/helper"), "#!/bin/sh\necho helped\n");
    let env = env.env("PATH", path_with(&tools.join("bin")));
    env.scenario(&passing());
    let out = env.run(&["start", "g", "--step", "one", "--verify", "mytool"]);
    env.assert_exit(&out, 1);
    let m = env.m1();
    let r = &m.results[&1];
    let error = r.error.clone().unwrap_or_default();
    assert!(
        error.contains("the sandbox hid") && error.contains("--sandbox-read ~/tools"),
        "{error}"
    );
    assert_eq!(
        env.calls_for(1),
        1,
        "no attempt after the sandbox's refusal"
    );
    let said = crate::support::stdout(&out);
    assert!(said.contains("--sandbox-read ~/tools"), "{said}");
    assert!(
        said.contains("no retry can pass") && !said.contains("of 1 allowed"),
        "no count of attempts it did not spend: {said}"
    );
    // Granted as it says, the same loop passes.
    let text = env.text().replacen(
        "SANDBOX_READ: ",
        &format!("SANDBOX_READ: {}, ", tools.display()),
        1,
    );
    std::fs::write(&env.file, text).unwrap();
    env.run_ok(&["retry"]);
    env.assert_status(Status::Done);
}

#[test]
fn an_agent_program_that_cannot_start_in_the_sandbox_halts_at_once_and_says_why() {
    if !bwrap_here("an agent program that cannot start in the sandbox …") {
        return;
    }
    let (env, home) = with_home(TestLoop::new());
    // The agent as a version manager installs it: a launcher that runs the real program from
    // a directory of its own under the home.
    let tools = home.join("tools");
    let real = tools.join("lib/agent");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::copy(crate::support::SIM, &real).unwrap();
    script(
        &tools.join("bin/agent"),
        &format!("#!/bin/sh\nexec {} \"$@\"\n", real.display()),
    );
    let env = env.env("LOOP_AGENT", tools.join("bin/agent"));
    env.scenario(&passing());
    env.run(&["start", "g", "--step", "one"]);
    let log = env.log();
    assert!(
        log.contains("cannot start in the sandbox") && log.contains("--sandbox-read ~/tools"),
        "{log}"
    );
    assert!(env.calls().is_empty(), "the agent never ran");
    assert_eq!(
        log.matches("spawn: Step 1").count(),
        1,
        "one start, no retries: {log}"
    );
}

#[test]
fn claude_code_on_bedrock_gets_its_aws_variables_and_credentials_only_while_the_mode_is_on() {
    if !bwrap_here("Claude Code on Bedrock …") {
        return;
    }
    let (env, home) = with_home(TestLoop::new());
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "[default]\nkey = AWS-CRED\n").unwrap();
    std::fs::write(home.join(".aws/other-secret"), SECRET).unwrap();
    let pry = Action::done("pried").bash(
        "echo \"[$AWS_REGION]\" > region.txt; cat \"$HOME/.aws/credentials\" > cred.txt 2>&1; \
         cat \"$HOME/.aws/other-secret\" > other.txt 2>&1",
    );
    let read = |env: &TestLoop, f: &str| std::fs::read_to_string(env.path().join(f)).unwrap();
    // The mode off: nothing of AWS reaches a run.
    let off = env.env("AWS_REGION", "eu-west-3");
    off.scenario(&Scenario::new().otherwise(pry.clone()));
    off.run_ok(&["start", "g", "--step", "one"]);
    assert_eq!(read(&off, "region.txt"), "[]\n");
    assert!(!read(&off, "cred.txt").contains("AWS-CRED"));
    // On: its variables and its credential file, and not the rest of ~/.aws.
    let on = off.env("CLAUDE_CODE_USE_BEDROCK", "1");
    let out = on.run_ok(&["start", "g", "--step", "one", "--force"]);
    assert_eq!(read(&on, "region.txt"), "[eu-west-3]\n");
    assert!(
        read(&on, "cred.txt").contains("AWS-CRED"),
        "{}",
        read(&on, "cred.txt")
    );
    assert!(
        !read(&on, "other.txt").contains(SECRET),
        "{}",
        read(&on, "other.txt")
    );
    let said = crate::support::stdout(&out) + &crate::support::stderr(&out);
    assert!(
        said.contains("on Bedrock"),
        "the start line says so: {said}"
    );
}

#[test]
fn a_venv_under_home_runs_verify_with_its_own_packages_with_no_flag() {
    if !bwrap_here("a venv under home …") {
        return;
    }
    let (env, home) = with_home(TestLoop::new());
    let venv = home.join("venvs/app");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        println!("skipped: a venv under home …: python3 -m venv cannot make one here");
        return;
    }
    // A package of the venv's own, as `pip install` would leave it.
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap();
    std::fs::write(site.join("greeting.py"), "WORDS = 'hello from the venv'\n").unwrap();
    let env = env
        .env("VIRTUAL_ENV", &venv)
        .env("PATH", path_with(&venv.join("bin")));
    let out = verify_in(
        &env,
        "python -c 'import greeting, sys; print(greeting.WORDS, sys.prefix)'",
    );
    assert_eq!(
        out,
        format!("hello from the venv {}\n", venv.display()),
        "{out}"
    );
    env.assert_status(Status::Done);
}
