//! The one merge of settings. Each place a person gives settings is a [`Layer`] (the flags of
//! `loop start`, M1.md, the environment, `loop.yaml`), read once, typed, `None` where it says
//! nothing; a loop runs with its layers stacked, highest first ([`Layer::over`]). For a new
//! loop the flags are on top, for a running one its M1.md; the environment and `loop.yaml`
//! are below either, and the defaults below all. A list that adds up (the settings table says
//! which: the sandbox's paths and variables) takes what every layer names; any other value is
//! the highest layer's. `loop.yaml` is read here too, into the typed layer it gives.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::Overrides;
use crate::error::Error;
use crate::m1::M1;
use crate::m1::keys::{AgentKey, Top};
use crate::m1::settings::{AgentKind, Kept, PermissionMode, SandboxMode, row};

/// `loop.yaml`: every field optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileSettings {
    #[serde(default)]
    pub agent: AgentFile,
    #[serde(default)]
    pub limits: LimitsFile,
    pub verify: Option<String>,
    pub notify_each_step: Option<bool>,
    pub transient_retries: Option<u32>,
    /// `review: true`, or `review: {model: M, max_retakes: N}`.
    pub review: Option<ReviewFile>,
    /// `approve_plan: true`: no step runs before a person approves the plan.
    pub approve_plan: Option<bool>,
    /// `commit: false`: DONE steps are not committed (a person commits by hand).
    pub commit: Option<bool>,
}

/// The `review:` of `loop.yaml`: on or off, or its settings (which turn it on).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum ReviewFile {
    On(bool),
    With {
        model: Option<String>,
        max_retakes: Option<u32>,
        backend: Option<AgentKind>,
    },
}

/// The `agent:` section of `loop.yaml`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentFile {
    pub backend: Option<AgentKind>,
    pub fallback: Option<OneOrMany<AgentKind>>,
    pub program: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    pub allowed_tools: Option<Vec<String>>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub model: Option<String>,
    #[serde(default)]
    pub extra_args: Vec<String>,
    pub sandbox: Option<SandboxMode>,
    pub sandbox_read: Option<Vec<Spanned<String>>>,
    pub sandbox_write: Option<Vec<Spanned<String>>>,
    pub sandbox_env: Option<Vec<String>>,
}

/// A `loop.yaml` value written as one (`fallback: codex`) or as a list (`fallback: [codex,
/// gemini]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub(crate) fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(t) => vec![t.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// The `limits:` section of `loop.yaml` (durations as `90s`, `5m`, `1h`). A duration keeps
/// where it was written, so that a bad one is an error at its line and column.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsFile {
    pub max_retries: Option<u32>,
    pub max_steps: Option<u32>,
    pub step_timeout: Option<Spanned<String>>,
    pub idle_timeout: Option<Spanned<String>>,
    pub max_cost_usd: Option<f64>,
    pub fallback_after: Option<Spanned<String>>,
    pub parallel: Option<u32>,
}

/// Declares [`Layer`]: each setting's field and type, and for a list, where M1.md keeps it
/// (whether it adds up is the settings table's word).
macro_rules! layer {
    ($($field:ident: $ty:ty $(=> $kept:expr)?,)*) => {
        /// The settings one place gives, typed: `None` where it says nothing.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub(crate) struct Layer {
            $(pub $field: Option<$ty>,)*
        }

        impl Layer {
            /// This layer over `below`: its own value wherever it has one, else `below`'s; a
            /// list that adds up, both.
            #[must_use]
            pub(crate) fn over(self, below: &Layer) -> Layer {
                Layer {
                    $($field: layer!(@pick self.$field, &below.$field $(, $kept)?),)*
                }
            }
        }
    };
    (@pick $a:expr, $b:expr) => { $a.or_else(|| $b.clone()) };
    (@pick $a:expr, $b:expr, $kept:expr) => { list($kept, $a, $b.as_ref()) };
}

layer! {
    max_retries: u32,
    max_steps: u32,
    step_timeout: Duration,
    idle_timeout: Duration,
    max_cost_usd: f64,
    max_retakes: u32,
    max_restarts: u32,
    context_threshold: u32,
    max_session: Duration,
    parallel: u32,
    fallback_after: Duration,
    backend: AgentKind,
    review_backend: AgentKind,
    fallback: Vec<AgentKind>,
    program: String,
    permission_mode: PermissionMode,
    allowed_tools: Vec<String> => Kept::Agent(AgentKey::AllowedTools),
    model: String,
    max_turns: u32,
    max_budget_usd: f64,
    extra_args: Vec<String> => Kept::Agent(AgentKey::ExtraArgs),
    sandbox: SandboxMode,
    sandbox_read: Vec<String> => Kept::Agent(AgentKey::SandboxRead),
    sandbox_write: Vec<String> => Kept::Agent(AgentKey::SandboxWrite),
    sandbox_env: Vec<String> => Kept::Agent(AgentKey::SandboxEnv),
    review_model: String,
    verify: String,
    review: bool,
    approve_plan: bool,
    commit: bool,
    notify_each_step: bool,
    transient_retries: u32,
}

/// A list of the setting at `kept`, `above` over `below`: both, each item once in the order
/// first named, where the table says it adds up; else the higher one.
fn list(
    kept: Kept,
    above: Option<Vec<String>>,
    below: Option<&Vec<String>>,
) -> Option<Vec<String>> {
    if !row(kept).is_some_and(|s| s.adds_up) {
        return above.or_else(|| below.cloned());
    }
    if above.is_none() && below.is_none() {
        return None;
    }
    Some(union([above.as_deref(), below.map(Vec::as_slice)]))
}

/// Every item of `lists`, once each, in the order first named.
fn union<const N: usize>(lists: [Option<&[String]>; N]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in lists.into_iter().flatten().flatten() {
        if !out.contains(p) {
            out.push(p.clone());
        }
    }
    out
}

/// The value of the environment variable the settings table names for `kept`, when set and
/// not blank.
fn env_of(kept: Kept) -> Option<String> {
    let name = row(kept)?.env?.name;
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `LOOP_COMMIT`: `on` or `off` (also `true`/`false`, `yes`/`no`); `None` when unset.
///
/// # Errors
/// Any other value, in words that say which.
fn env_commit() -> crate::error::Result<Option<bool>> {
    let kept = Kept::Top(Top::CommitSteps);
    let Some(v) = env_of(kept) else {
        return Ok(None);
    };
    match crate::m1::keys::Kind::Switch.check(&v) {
        Ok(()) => Ok(Some(crate::m1::keys::switch_on(&v))),
        Err(_) => Err(Error::bad_input(format!(
            "{}: expected `on` or `off`, found `{v}`",
            row(kept).and_then(|s| s.env).map_or("", |e| e.name)
        ))),
    }
}

/// A value of the variable that gives `kept` that cannot be read: bad input, naming it.
fn env_error(kept: Kept, why: &str) -> Error {
    let name = row(kept).and_then(|s| s.env).map_or("", |e| e.name);
    Error::bad_input(format!("{name}: {why}"))
}

/// The paths of an `agent.sandbox_*` list of `loop.yaml`; one that is neither absolute nor
/// from `~/` is an error at `path:line:column`.
fn sandbox_paths(
    field: &str,
    path: &Path,
    v: Option<&Vec<Spanned<String>>>,
) -> crate::error::Result<Option<Vec<String>>> {
    v.map(|list| {
        let mut paths = Vec::new();
        for s in list {
            let one = crate::m1::typed::paths(&s.value).map_err(|e| {
                let at = &s.referenced;
                Error::bad_input(format!(
                    "{}:{}:{}: agent.{field}: {e}",
                    path.display(),
                    at.line(),
                    at.column()
                ))
            })?;
            paths.extend(one);
        }
        Ok(paths)
    })
    .transpose()
}

/// A `limits:` duration of `loop.yaml`; a bad one is an error at `path:line:column`.
fn dur(
    field: &str,
    path: &Path,
    v: Option<&Spanned<String>>,
) -> crate::error::Result<Option<Duration>> {
    v.map(|s| {
        crate::m1::typed::duration(&s.value).map_err(|e| {
            let at = &s.referenced;
            Error::bad_input(format!(
                "{}:{}:{}: limits.{field}: {e}",
                path.display(),
                at.line(),
                at.column()
            ))
        })
    })
    .transpose()
}

impl Layer {
    /// What the flags of `loop start` give (and `loop demo`'s program).
    #[must_use]
    pub(crate) fn flags(o: &Overrides) -> Layer {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        Layer {
            max_retries: o.max_retries,
            max_steps: o.max_steps,
            step_timeout: o.step_timeout,
            idle_timeout: o.idle_timeout,
            max_cost_usd: o.max_cost_usd,
            parallel: o.parallel,
            fallback_after: o.fallback_after,
            backend: o.backend,
            review_backend: o.review_backend,
            fallback: (!o.fallback.is_empty()).then(|| o.fallback.clone()),
            program: o.agent_program.clone(),
            permission_mode: o.permission_mode,
            allowed_tools: o.allowed_tools.clone(),
            model: o.model.clone(),
            max_turns: o.max_turns,
            max_budget_usd: o.max_budget_usd,
            sandbox: o.sandbox,
            sandbox_read: list(&o.sandbox_read),
            sandbox_write: list(&o.sandbox_write),
            sandbox_env: list(&o.sandbox_env),
            review_model: o.review_model.clone(),
            verify: o.verify.clone(),
            // A reviewer's model or backend asks for a review.
            review: (o.review || o.review_model.is_some() || o.review_backend.is_some())
                .then_some(true),
            approve_plan: o.approve_plan.then_some(true),
            commit: o.no_commit.then_some(false),
            ..Layer::default()
        }
    }

    /// What the environment gives, through the variables the settings table names.
    ///
    /// # Errors
    /// A value that cannot be read, naming its variable: a grant the runs would otherwise go
    /// without, and not a word said.
    pub(crate) fn env() -> crate::error::Result<Layer> {
        let agent = |k| env_of(Kept::Agent(k));
        let read = |k, parse: fn(&str) -> Result<Vec<String>, String>| {
            agent(k)
                .map(|v| parse(&v).map_err(|e| env_error(Kept::Agent(k), &e)))
                .transpose()
        };
        Ok(Layer {
            program: agent(AgentKey::Program),
            sandbox: agent(AgentKey::Sandbox)
                .map(|v| {
                    v.parse()
                        .map_err(|e: String| env_error(Kept::Agent(AgentKey::Sandbox), &e))
                })
                .transpose()?,
            sandbox_read: read(AgentKey::SandboxRead, crate::m1::typed::paths)?,
            sandbox_write: read(AgentKey::SandboxWrite, crate::m1::typed::paths)?,
            sandbox_env: read(AgentKey::SandboxEnv, crate::m1::typed::env_names)?,
            commit: env_commit()?,
            ..Layer::default()
        })
    }

    /// What `loop.yaml` (read from `path`) gives.
    ///
    /// # Errors
    /// A bad duration, at its line and column.
    pub(crate) fn yaml(f: &FileSettings, path: &Path) -> crate::error::Result<Layer> {
        let (a, l) = (&f.agent, &f.limits);
        let (review, review_model, max_retakes, review_backend) = match &f.review {
            None => (None, None, None, None),
            Some(ReviewFile::On(on)) => (Some(*on), None, None, None),
            Some(ReviewFile::With {
                model,
                max_retakes,
                backend,
            }) => (Some(true), model.clone(), *max_retakes, *backend),
        };
        Ok(Layer {
            max_retries: l.max_retries,
            max_steps: l.max_steps,
            step_timeout: dur("step_timeout", path, l.step_timeout.as_ref())?,
            idle_timeout: dur("idle_timeout", path, l.idle_timeout.as_ref())?,
            max_cost_usd: l.max_cost_usd,
            max_retakes,
            parallel: l.parallel,
            fallback_after: dur("fallback_after", path, l.fallback_after.as_ref())?,
            backend: a.backend,
            review_backend,
            fallback: a.fallback.as_ref().map(OneOrMany::to_vec),
            program: a.program.clone(),
            permission_mode: a.permission_mode,
            allowed_tools: a.allowed_tools.clone(),
            model: a.model.clone(),
            max_turns: a.max_turns,
            max_budget_usd: a.max_budget_usd,
            extra_args: Some(a.extra_args.clone()),
            sandbox: a.sandbox,
            sandbox_read: sandbox_paths("sandbox_read", path, a.sandbox_read.as_ref())?,
            sandbox_write: sandbox_paths("sandbox_write", path, a.sandbox_write.as_ref())?,
            sandbox_env: a.sandbox_env.clone(),
            review_model,
            verify: f.verify.clone(),
            review,
            approve_plan: f.approve_plan,
            commit: f.commit,
            notify_each_step: f.notify_each_step,
            transient_retries: f.transient_retries,
            ..Layer::default()
        })
    }

    /// What a loop's M1.md says. `REVIEW` and `APPROVE_PLAN` are on or off by the file alone.
    #[must_use]
    pub(crate) fn m1(m: &M1) -> Layer {
        let (l, a) = (&m.limits, &m.agent);
        Layer {
            max_retries: l.max_retries,
            max_steps: l.max_steps,
            step_timeout: l.step_timeout,
            idle_timeout: l.idle_timeout,
            max_cost_usd: l.max_cost_usd,
            max_retakes: l.max_retakes,
            max_restarts: l.max_restarts,
            context_threshold: l.context_threshold,
            max_session: l.max_session,
            parallel: l.parallel,
            fallback_after: l.fallback_after,
            backend: a.backend,
            review_backend: a.review_backend,
            fallback: (!a.fallback.is_empty()).then(|| a.fallback.clone()),
            program: a.program.clone(),
            permission_mode: a.permission_mode,
            allowed_tools: a.allowed_tools.clone(),
            model: a.model.clone(),
            max_turns: a.max_turns,
            max_budget_usd: a.max_budget_usd,
            extra_args: a.extra_args.clone(),
            sandbox: a.sandbox,
            sandbox_read: a.sandbox_read.clone(),
            sandbox_write: a.sandbox_write.clone(),
            sandbox_env: a.sandbox_env.clone(),
            review_model: a.review_model.clone(),
            verify: m.verify.clone(),
            review: Some(m.review),
            approve_plan: Some(m.approve_plan),
            commit: m.commit_steps,
            notify_each_step: None,
            transient_retries: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Layer {
        let f: FileSettings = serde_saphyr::from_str(text).unwrap();
        Layer::yaml(&f, Path::new("loop.yaml")).unwrap()
    }

    fn m1(text: &str) -> Layer {
        Layer::m1(&crate::m1::Document::parse(text).unwrap().view())
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_sandboxs_lists_add_up_across_flags_environment_loop_yaml_and_m1() {
        let flags = Layer::flags(&Overrides {
            sandbox_read: vec!["/flag".into()],
            sandbox_write: vec!["/flag-w".into()],
            sandbox_env: vec!["FLAG".into()],
            ..Overrides::default()
        });
        // What `LOOP_SANDBOX_READ`, `_WRITE` and `_ENV` give (read by `Layer::env`).
        let env = Layer {
            sandbox_read: Some(strings(&["/env", "/flag"])),
            sandbox_write: Some(strings(&["/env-w"])),
            sandbox_env: Some(strings(&["ENV_*"])),
            ..Layer::default()
        };
        let file = yaml(
            "agent:\n  sandbox_read: [/yaml]\n  sandbox_write: [/yaml-w]\n  sandbox_env: [YAML]\n",
        );
        let below = env.over(&file);
        let new = flags.over(&below);
        assert_eq!(new.sandbox_read, Some(strings(&["/flag", "/env", "/yaml"])));
        assert_eq!(
            new.sandbox_write,
            Some(strings(&["/flag-w", "/env-w", "/yaml-w"]))
        );
        assert_eq!(new.sandbox_env, Some(strings(&["FLAG", "ENV_*", "YAML"])));
        let running =
            m1("STATUS: RUNNING\nGOAL: g\nAGENT:\n  SANDBOX_READ: /m1\n  SANDBOX_ENV: M1\n")
                .over(&below);
        assert_eq!(
            running.sandbox_read,
            Some(strings(&["/m1", "/env", "/flag", "/yaml"]))
        );
        assert_eq!(running.sandbox_write, Some(strings(&["/env-w", "/yaml-w"])));
        assert_eq!(running.sandbox_env, Some(strings(&["M1", "ENV_*", "YAML"])));
    }

    #[test]
    fn a_setting_that_does_not_add_up_is_the_highest_layers_that_gives_it() {
        let file = yaml(
            "agent:\n  allowed_tools: [Read]\n  model: sonnet\n  program: from-yaml\nlimits:\n  step_timeout: 90s\n  max_retries: 5\n",
        );
        let flags = Layer::flags(&Overrides {
            allowed_tools: Some(strings(&["Edit"])),
            max_retries: Some(2),
            ..Overrides::default()
        });
        let env = Layer {
            program: Some("from-env".into()),
            ..Layer::default()
        };
        let new = flags.over(&env.clone().over(&file));
        assert_eq!(new.allowed_tools, Some(strings(&["Edit"])));
        assert_eq!(new.max_retries, Some(2));
        assert_eq!(new.model.as_deref(), Some("sonnet"));
        assert_eq!(new.program.as_deref(), Some("from-env"));
        assert_eq!(new.step_timeout, Some(Duration::from_secs(90)));
        let running = m1(
            "STATUS: RUNNING\nGOAL: g\nLIMITS:\n  STEP_TIMEOUT: 1h\nAGENT:\n  PROGRAM: pinned\n",
        )
        .over(&env.over(&file));
        assert_eq!(running.program.as_deref(), Some("pinned"));
        assert_eq!(running.step_timeout, Some(Duration::from_secs(3600)));
        assert_eq!(running.max_retries, Some(5));
        assert_eq!(running.allowed_tools, Some(strings(&["Read"])));
    }

    #[test]
    fn only_the_lists_the_settings_table_says_add_up_do() {
        for s in crate::m1::settings::SETTINGS {
            let list = matches!(
                s.m1,
                Kept::Agent(AgentKey::SandboxRead | AgentKey::SandboxWrite | AgentKey::SandboxEnv)
            );
            assert_eq!(s.adds_up, list, "{:?}", s.m1);
        }
        let above = Some(strings(&["a"]));
        let below = Some(strings(&["b"]));
        let adds = list(
            Kept::Agent(AgentKey::SandboxRead),
            above.clone(),
            below.as_ref(),
        );
        assert_eq!(adds, Some(strings(&["a", "b"])));
        let wins = list(Kept::Agent(AgentKey::AllowedTools), above, below.as_ref());
        assert_eq!(wins, Some(strings(&["a"])));
    }
}
