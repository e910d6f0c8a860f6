//! The person's toolchains, as their shell finds them, in every confined run with nothing to
//! configure: version managers and their shims, the interpreters they select, and the caches
//! their tools write. Most live under `$HOME` (rustup, pyenv, nvm, …), which a run otherwise
//! sees empty: a shim that cannot find its manager fails with exit 127, and `cargo` through
//! rustup cannot choose a toolchain. Each is found from its standard variable, or its standard
//! place when that is unset, and granted only where it exists: what runs, read-only; what a tool
//! writes as it works (a download cache, a build cache), writable. The secret places are never
//! granted, whatever a tool's directory holds (see [`SECRET`], and `mounts` hides them).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Access;

/// A path a tool needs: where, with what access, and which tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    pub path: PathBuf,
    pub access: Access,
    pub tool: &'static str,
}

/// Where a tool keeps what it needs: its variable (whose value is the place), else its place
/// relative to `$HOME` (absolute: elsewhere), and the part of it, with its access.
struct Place {
    tool: &'static str,
    var: Option<&'static str>,
    default: Option<&'static str>,
    /// Beneath the place: `""` for the place itself.
    sub: &'static str,
    access: Access,
}

const fn read(
    tool: &'static str,
    var: Option<&'static str>,
    default: Option<&'static str>,
) -> Place {
    Place {
        tool,
        var,
        default,
        sub: "",
        access: Access::Read,
    }
}

const fn write(
    tool: &'static str,
    var: Option<&'static str>,
    default: Option<&'static str>,
    sub: &'static str,
) -> Place {
    Place {
        tool,
        var,
        default,
        sub,
        access: Access::Write,
    }
}

/// Every toolchain the sandbox knows, and what of it a run gets. docs/09-sandbox.md has the
/// same as a table; a test holds the two together.
const PLACES: &[Place] = &[
    // rustup's toolchains and settings; cargo's programs and configuration read, its registry
    // and git checkouts written (downloads, and the lock an offline build takes). Not
    // `~/.cargo/credentials.toml`: only these parts of `~/.cargo` are bound.
    read("rustup", Some("RUSTUP_HOME"), Some(".rustup")),
    Place {
        sub: "bin",
        ..read("cargo", Some("CARGO_HOME"), Some(".cargo"))
    },
    Place {
        sub: "config.toml",
        ..read("cargo", Some("CARGO_HOME"), Some(".cargo"))
    },
    Place {
        sub: "config",
        ..read("cargo", Some("CARGO_HOME"), Some(".cargo"))
    },
    write("cargo", Some("CARGO_HOME"), Some(".cargo"), "registry"),
    write("cargo", Some("CARGO_HOME"), Some(".cargo"), "git"),
    // Python: pyenv (its shims run `libexec/pyenv`), uv's interpreters and tools, pipx, conda,
    // the virtual environment in force; pip's and uv's caches.
    read("pyenv", Some("PYENV_ROOT"), Some(".pyenv")),
    read("uv", Some("UV_PYTHON_INSTALL_DIR"), Some(".local/share/uv")),
    write("uv", Some("UV_CACHE_DIR"), Some(".cache/uv"), ""),
    read("pipx", Some("PIPX_HOME"), Some(".local/share/pipx")),
    read("pipx", None, Some(".local/pipx")),
    read("python", None, Some(".local/lib")),
    write("pip", Some("PIP_CACHE_DIR"), Some(".cache/pip"), ""),
    read("venv", Some("VIRTUAL_ENV"), None),
    read("conda", Some("CONDA_PREFIX"), None),
    read("conda", None, Some("miniconda3")),
    read("conda", None, Some("anaconda3")),
    read("conda", None, Some("miniforge3")),
    read("conda", None, Some("mambaforge")),
    // Node: nvm, volta, an npm prefix of the person's; npm's cache.
    read("nvm", Some("NVM_DIR"), Some(".nvm")),
    read("volta", Some("VOLTA_HOME"), Some(".volta")),
    read("npm", Some("NPM_CONFIG_PREFIX"), Some(".npm-global")),
    write("npm", Some("npm_config_cache"), Some(".npm"), ""),
    read("pnpm", Some("PNPM_HOME"), Some(".local/share/pnpm")),
    // Managers of many languages.
    read("asdf", Some("ASDF_DATA_DIR"), Some(".asdf")),
    read("mise", Some("MISE_DATA_DIR"), Some(".local/share/mise")),
    read("mise", None, Some(".config/mise")),
    read("sdkman", Some("SDKMAN_DIR"), Some(".sdkman")),
    read(
        "homebrew",
        Some("HOMEBREW_PREFIX"),
        Some("/home/linuxbrew/.linuxbrew"),
    ),
    read("homebrew", None, Some(".linuxbrew")),
    // Go: the toolchain, the module cache and the build cache.
    read("go", Some("GOROOT"), None),
    Place {
        sub: "bin",
        ..read("go", Some("GOPATH"), Some("go"))
    },
    write("go", Some("GOMODCACHE"), None, ""),
    write("go", Some("GOPATH"), Some("go"), "pkg/mod"),
    write("go", Some("GOCACHE"), Some(".cache/go-build"), ""),
    // A JDK named by its variable.
    read("java", Some("JAVA_HOME"), None),
];

/// The places a run never sees, whatever a grant holds: keys, tokens, credentials, keyrings,
/// password stores, browser profiles. Relative to `$HOME`.
pub(crate) const SECRET: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".config/gh",
    ".docker",
    ".kube",
    ".git-credentials",
    ".config/git/credentials",
    ".local/share/keyrings",
    ".password-store",
    ".pki",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gcloud",
    ".azure",
    ".terraform.d",
];

/// The variables that name a toolchain's place (and the ones its tools read to choose a
/// version), which a confined run keeps so that its tools look where the person's do.
pub(crate) const ENV: &[&str] = &[
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "CARGO_HOME",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "UV_PYTHON_INSTALL_DIR",
    "UV_CACHE_DIR",
    "PIPX_HOME",
    "PIP_CACHE_DIR",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "NVM_DIR",
    "NVM_BIN",
    "VOLTA_HOME",
    "NPM_CONFIG_PREFIX",
    "npm_config_cache",
    "PNPM_HOME",
    "ASDF_DATA_DIR",
    "ASDF_DIR",
    "MISE_DATA_DIR",
    "SDKMAN_DIR",
    "HOMEBREW_PREFIX",
    "HOMEBREW_CELLAR",
    "HOMEBREW_REPOSITORY",
    "GOROOT",
    "GOPATH",
    "GOMODCACHE",
    "GOCACHE",
    "GOFLAGS",
    "JAVA_HOME",
];

/// What a run gets of the toolchains found here, for the person whose home is `home` and whose
/// variables `var` reads. Never a grant that is `home`, holds it, or is (or lies in) a secret
/// place.
#[must_use]
pub(crate) fn grants(home: &Path, var: &dyn Fn(&str) -> Option<OsString>) -> Vec<Grant> {
    let mut out: Vec<Grant> = Vec::new();
    for p in PLACES {
        let base = p
            .var
            .and_then(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|b| b.is_absolute())
            .or_else(|| p.default.map(|d| home.join(d)));
        let Some(base) = base else {
            continue;
        };
        let path = if p.sub.is_empty() {
            base
        } else {
            base.join(p.sub)
        };
        if !path.exists() || !allowed(&path, home) {
            continue;
        }
        if !out.iter().any(|g| g.path == path) {
            out.push(Grant {
                path,
                access: p.access,
                tool: p.tool,
            });
        }
    }
    out
}

/// [`grants`] for the person the loop runs as (`$HOME`, their variables), with their access: what
/// every confined run gets of their toolchains.
#[must_use]
pub(crate) fn of_person(home: &Path) -> Vec<(PathBuf, Access)> {
    let var = |k: &str| std::env::var_os(k);
    grants(home, &var)
        .into_iter()
        .map(|g| (g.path, g.access))
        .collect()
}

/// `programs` and the interpreters of those that are scripts ([`interpreter`], through the
/// person's `PATH`): what a run needs to start them.
#[must_use]
pub(crate) fn with_interpreters(mut programs: Vec<PathBuf>) -> Vec<PathBuf> {
    let path_var = std::env::var_os("PATH");
    let found: Vec<PathBuf> = programs
        .iter()
        .filter_map(|p| interpreter(p, path_var.as_deref()))
        .collect();
    programs.extend(found);
    programs
}

/// Whether `path` may be granted to a run: not `home` or above it, not a secret place or in
/// one.
#[must_use]
pub(crate) fn allowed(path: &Path, home: &Path) -> bool {
    !home.starts_with(path) && !SECRET.iter().any(|s| path.starts_with(home.join(s)))
}

/// The interpreter of the script `program` (its `#!` line), followed through `env` and a
/// version manager's shim to the program that runs: what a run needs to start `program` at all.
/// `None` for a binary, or a script whose interpreter cannot be found.
#[must_use]
pub(crate) fn interpreter(program: &Path, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = {
        use std::io::Read;
        std::fs::File::open(program).ok()?.read(&mut head).ok()?
    };
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next()?).into_owned();
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    let named = if first.file_name().is_some_and(|n| n == "env") {
        // `#!/usr/bin/env -S node --flag`, `#!/usr/bin/env python3`.
        let name = words.find(|w| !w.starts_with('-'))?;
        std::env::split_paths(path_var?)
            .map(|d| d.join(name))
            .find(|p| p.is_file())?
    } else {
        first
    };
    std::fs::canonicalize(named).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toolchain_is_found_from_its_variable_or_its_place_and_only_where_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        for d in [
            ".rustup",
            ".cargo/bin",
            ".cargo/registry",
            ".pyenv",
            "elsewhere/nvm",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
        let nvm = home.join("elsewhere/nvm");
        let var = |k: &str| (k == "NVM_DIR").then(|| nvm.clone().into_os_string());
        let g = grants(&home, &var);
        let has = |p: &Path, a: Access| g.iter().any(|x| x.path == p && x.access == a);
        assert!(has(&home.join(".rustup"), Access::Read), "{g:?}");
        assert!(has(&home.join(".cargo/bin"), Access::Read), "{g:?}");
        assert!(has(&home.join(".cargo/registry"), Access::Write), "{g:?}");
        assert!(has(&home.join(".pyenv"), Access::Read), "{g:?}");
        assert!(has(&nvm, Access::Read), "{g:?}");
        assert!(!g.iter().any(|x| x.path == home.join(".cargo")), "{g:?}");
        assert!(
            !g.iter().any(|x| x.path == home.join(".nvm")),
            "not there: {g:?}"
        );
        assert!(!g.iter().any(|x| x.path.ends_with("credentials.toml")));
    }

    #[test]
    fn the_manuals_table_names_every_toolchain_and_every_secret_place() {
        let doc = include_str!("../../docs/09-sandbox.md");
        let table = &doc[doc.find("## Your toolchains").unwrap()..];
        for p in PLACES {
            assert!(table.contains(&format!("\n| {} |", p.tool)), "{}", p.tool);
            if let Some(v) = p.var {
                assert!(table.contains(&format!("`{v}`")), "{v}");
            }
        }
        for s in SECRET.iter().filter(|s| !s.starts_with(".cargo/")) {
            assert!(table.contains(&format!("`~/{s}`")), "{s}");
        }
    }

    #[test]
    fn no_grant_is_home_above_it_or_a_secret_place() {
        let home = Path::new("/home/u");
        for bad in ["/home/u", "/home", "/", "/home/u/.ssh", "/home/u/.ssh/keys"] {
            assert!(!allowed(Path::new(bad), home), "{bad}");
        }
        assert!(allowed(Path::new("/home/u/.rustup"), home));
        let var = |k: &str| (k == "JAVA_HOME").then(|| OsString::from("/home/u"));
        assert!(grants(home, &var).iter().all(|g| g.path != home));
    }

    #[test]
    fn a_scripts_interpreter_is_found_through_env_and_its_own_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("node"), "").unwrap();
        let via_env = dir.path().join("a");
        std::fs::write(&via_env, "#!/usr/bin/env -S node --x\n").unwrap();
        let direct = dir.path().join("b");
        std::fs::write(&direct, format!("#!{}/node\n", bin.display())).unwrap();
        let path = std::env::join_paths([&bin]).unwrap();
        let want = std::fs::canonicalize(bin.join("node")).unwrap();
        assert_eq!(interpreter(&via_env, Some(&path)), Some(want.clone()));
        assert_eq!(interpreter(&direct, None), Some(want));
        assert_eq!(interpreter(Path::new("/bin/sh"), Some(&path)), None);
    }
}
