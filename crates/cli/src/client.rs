//! Which cluster a command talks to, the same way for every command: `--kubeconfig`, then
//! `$KUBECONFIG`, then the kubeconfig `tessera up` wrote in its data directory, then the usual
//! discovery (`~/.kube/config`, an in-cluster service account). The choice is a pure function
//! ([`resolve`]); [`connect`] reads the chosen files and checks the server answers, naming the
//! server and the file in every error.
//!
//! Knows nothing of what a command does with the client.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

/// The name of the admin kubeconfig `tessera up` writes in its data directory.
pub const PLATFORM_KUBECONFIG: &str = "kubeconfig";

/// A data directory option, with the same name, variable and default in every command.
#[derive(Args, Debug, Clone)]
pub struct DataDirArgs {
    /// The platform's data directory: its store, certificates, kubeconfig and logs.
    #[arg(
        long,
        env = "TESSERA_DATA_DIR",
        default_value_os_t = default_data_dir(),
        value_parser = absolute_path,
        global = true
    )]
    pub data_dir: PathBuf,
}

/// The options of a command that talks to a cluster.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// The kubeconfig (default: `$KUBECONFIG`, else the platform's in its data directory,
    /// else `~/.kube/config` or in-cluster credentials).
    #[arg(long, value_parser = absolute_path, global = true)]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataDirArgs,
}

/// `$XDG_DATA_HOME/tessera`, else `~/.local/share/tessera`.
pub fn default_data_dir() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    let dir = base.join("tessera");
    std::path::absolute(&dir).unwrap_or(dir)
}

/// A path option made absolute against the working directory, so what is printed about it
/// names the same file from anywhere.
pub fn absolute_path(value: &str) -> Result<PathBuf, String> {
    std::path::absolute(value).map_err(|e| format!("{value}: {e}"))
}

/// Where a command's cluster comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig`.
    Flag(PathBuf),
    /// `$KUBECONFIG`: its files, merged as kubectl merges them.
    Env(Vec<PathBuf>),
    /// The platform's own kubeconfig in its data directory.
    DataDir(PathBuf),
    /// `~/.kube/config`, else an in-cluster service account; the data directory (named
    /// here for errors) had no kubeconfig.
    Discovered {
        /// The data directory without a kubeconfig.
        data_dir: PathBuf,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(":")
        };
        match self {
            Source::Flag(path) => write!(f, "--kubeconfig {}", path.display()),
            Source::Env(paths) => write!(f, "$KUBECONFIG={}", join(paths)),
            Source::DataDir(path) => write!(f, "the platform's kubeconfig {}", path.display()),
            Source::Discovered { .. } => f.write_str("~/.kube/config or in-cluster credentials"),
        }
    }
}

/// The source of a command's cluster: `flag`, else the `$KUBECONFIG` value `env` (empty
/// entries ignored, as kubectl does), else `<data_dir>/kubeconfig` when it exists, else
/// discovery.
pub fn resolve(
    flag: Option<&Path>,
    env: Option<&OsStr>,
    data_dir: &Path,
    data_dir_has_kubeconfig: bool,
) -> Source {
    if let Some(path) = flag {
        return Source::Flag(path.to_path_buf());
    }
    let env_paths: Vec<PathBuf> = env
        .map(|value| {
            std::env::split_paths(value)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !env_paths.is_empty() {
        return Source::Env(env_paths);
    }
    if data_dir_has_kubeconfig {
        return Source::DataDir(data_dir.join(PLATFORM_KUBECONFIG));
    }
    Source::Discovered {
        data_dir: data_dir.to_path_buf(),
    }
}

/// The chosen source for `args` in this process's environment.
pub fn source(args: &ClusterArgs) -> Source {
    let data_dir = &args.data.data_dir;
    resolve(
        args.kubeconfig.as_deref(),
        std::env::var_os("KUBECONFIG").as_deref(),
        data_dir,
        data_dir.join(PLATFORM_KUBECONFIG).is_file(),
    )
}

async fn config(source: &Source) -> anyhow::Result<kube::Config> {
    let files: &[PathBuf] = match source {
        Source::Flag(path) | Source::DataDir(path) => std::slice::from_ref(path),
        Source::Env(paths) => paths,
        Source::Discovered { data_dir } => {
            return kube::Config::infer().await.with_context(|| {
                format!(
                    "no cluster to talk to: no --kubeconfig, $KUBECONFIG is unset, no {} (no \
                     `tessera up` there; pass --data-dir or --kubeconfig), and neither \
                     ~/.kube/config nor in-cluster credentials",
                    data_dir.join(PLATFORM_KUBECONFIG).display()
                )
            });
        }
    };
    let mut merged = kube::config::Kubeconfig::default();
    for path in files {
        let file = kube::config::Kubeconfig::read_from(path)
            .with_context(|| format!("read kubeconfig {} ({source})", path.display()))?;
        merged = merged
            .merge(file)
            .with_context(|| format!("merge kubeconfig {}", path.display()))?;
    }
    kube::Config::from_custom_kubeconfig(merged, &Default::default())
        .await
        .with_context(|| format!("use {source}"))
}

/// A client for the cluster `args` choose, checked to answer: an error names the server and
/// the kubeconfig it came from.
pub async fn connect(args: &ClusterArgs) -> anyhow::Result<kube::Client> {
    connect_to(&source(args)).await
}

/// A client for the cluster of `source`, checked to answer.
pub async fn connect_to(source: &Source) -> anyhow::Result<kube::Client> {
    let config = config(source).await?;
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config)
        .with_context(|| format!("set up a client for {server} (from {source})"))?;
    client.apiserver_version().await.with_context(|| {
        format!("the Kubernetes API at {server} (from {source}) did not answer")
    })?;
    tracing::debug!(%server, %source, "connected");
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_is_the_flag_then_the_variable_then_the_data_directory() {
        let data = Path::new("/data");
        let flag = Some(Path::new("/flag/config"));
        let env = Some(OsStr::new("/env/a:/env/b"));
        let discovered = Source::Discovered {
            data_dir: data.into(),
        };
        // (flag, $KUBECONFIG, data dir has a kubeconfig, chosen)
        let table: [(Option<&Path>, Option<&OsStr>, bool, Source); 9] = [
            (flag, env, true, Source::Flag("/flag/config".into())),
            (flag, None, false, Source::Flag("/flag/config".into())),
            (
                None,
                env,
                true,
                Source::Env(vec!["/env/a".into(), "/env/b".into()]),
            ),
            (
                None,
                Some(OsStr::new("::/env/only:")),
                true,
                Source::Env(vec!["/env/only".into()]),
            ),
            (
                None,
                env,
                false,
                Source::Env(vec!["/env/a".into(), "/env/b".into()]),
            ),
            (None, None, true, Source::DataDir("/data/kubeconfig".into())),
            (
                None,
                Some(OsStr::new("")),
                true,
                Source::DataDir("/data/kubeconfig".into()),
            ),
            (None, None, false, discovered.clone()),
            (None, Some(OsStr::new(":")), false, discovered),
        ];
        for (flag, env, exists, want) in table {
            assert_eq!(
                resolve(flag, env, data, exists),
                want,
                "flag {flag:?}, $KUBECONFIG {env:?}, data-dir kubeconfig {exists}"
            );
        }
    }

    #[test]
    fn sources_name_their_files() {
        let table = [
            (Source::Flag("/a".into()), "--kubeconfig /a"),
            (
                Source::Env(vec!["/a".into(), "/b".into()]),
                "$KUBECONFIG=/a:/b",
            ),
            (
                Source::DataDir("/d/kubeconfig".into()),
                "the platform's kubeconfig /d/kubeconfig",
            ),
        ];
        for (source, want) in table {
            assert_eq!(source.to_string(), want);
        }
    }

    #[test]
    fn path_options_become_absolute() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(absolute_path("x/kubeconfig"), Ok(cwd.join("x/kubeconfig")));
        assert_eq!(absolute_path("/abs"), Ok(PathBuf::from("/abs")));
    }
}
