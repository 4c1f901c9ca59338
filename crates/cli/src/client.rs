//! A kube client for the commands that talk to a running cluster: from a kubeconfig file,
//! or the usual in-cluster / `$KUBECONFIG` / `~/.kube/config` discovery.

use std::path::Path;

use anyhow::Context;

/// A client from `kubeconfig`, or discovered when it is `None`.
pub async fn connect(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let Some(path) = kubeconfig else {
        return kube::Client::try_default()
            .await
            .context("no kubeconfig (pass --kubeconfig)");
    };
    let file = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("read {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .with_context(|| format!("use {}", path.display()))?;
    Ok(kube::Client::try_from(config)?)
}

/// A client for a command about a running platform: `--kubeconfig`, else the platform's own
/// kubeconfig in its data directory when there is one, else discovery.
pub async fn connect_platform(
    kubeconfig: Option<&Path>,
    data_dir: &Path,
) -> anyhow::Result<kube::Client> {
    let platform = data_dir.join("kubeconfig");
    let chosen = kubeconfig.or_else(|| platform.exists().then_some(platform.as_path()));
    connect(chosen).await
}
