//! Secrets encrypted at rest, the shell's half: `tessera up --encryption-provider-config`
//! reads kube-apiserver's `EncryptionConfiguration` file (decided by `tessera-encryption`)
//! and hands the store a [`tessera_store::ValueTransformer`] that draws each nonce or IV from
//! the operating system; and `tessera secrets rotate` rewrites every object of the encrypted
//! resources so the first key encrypts all of them and older keys can be removed.
//!
//! Rotation goes through the running platform's API (its kubeconfig), not the data
//! directory, because that is what upstream's procedure is: add the new key second, restart,
//! move it first, restart, then `kubectl get secrets -A -o json | kubectl replace -f -`,
//! then remove the old key. A running platform holds its data directory, so an offline
//! rewrite would need it stopped; through the API each rewrite is one compare-and-swap
//! update of one object (a `PUT` carrying the listed `resourceVersion`) decided by the same
//! write path as every other client's, so no object is ever half-written, and a concurrent
//! writer wins: its update was already written with the first key, and the rewrite re-reads
//! and retries. The server rewrites a *stale* stored form even when the object is unchanged
//! (kube-apiserver's `GuaranteedUpdate` does the same), so the rewrite needs no edit.
//!
//! Knows nothing of ciphers (the core) nor of SQLite (the store).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::{Discovery, Scope, verbs};
use ring::rand::SecureRandom;
use tessera_encryption::transform::ENCRYPTED_PREFIX;
use tessera_encryption::{EncryptionConfig, GroupResource};
use tessera_store::{FromStorage, ValueTransformer};

/// Reads an `--encryption-provider-config` file: every problem is named with the file, its
/// line and the field.
pub fn load_config(path: &Path) -> anyhow::Result<EncryptionConfig> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "error reading encryption provider configuration file {}",
            path.display()
        )
    })?;
    Ok(EncryptionConfig::parse(&path.display().to_string(), &text)?)
}

/// The store's transformer for a configuration.
pub fn transformer(config: EncryptionConfig) -> Arc<dyn ValueTransformer> {
    Arc::new(StoreEncryption {
        config,
        random: ring::rand::SystemRandom::new(),
    })
}

/// The configuration applied to store keys, with the operating system's randomness.
struct StoreEncryption {
    config: EncryptionConfig,
    random: ring::rand::SystemRandom,
}

impl ValueTransformer for StoreEncryption {
    fn transform_to_storage(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let transformer = self.config.transformer_for_key(key);
        if transformer.writes_plain() {
            return Ok(None);
        }
        let mut random = [0u8; 24];
        self.random
            .fill(&mut random)
            .map_err(|_| "cannot draw random bytes from the operating system".to_string())?;
        Ok(Some(transformer.to_storage(value, key.as_bytes(), &random)))
    }

    fn transform_from_storage(&self, key: &str, stored: &[u8]) -> Result<FromStorage, String> {
        let transformer = self.config.transformer_for_key(key);
        if transformer.writes_plain() && !stored.starts_with(ENCRYPTED_PREFIX.as_bytes()) {
            // Identity first reads it as it is, not stale: no copy at start-up.
            return Ok(FromStorage {
                value: None,
                stale: false,
            });
        }
        let read = transformer
            .from_storage(stored, key.as_bytes())
            .map_err(|error| error.to_string())?;
        let value = (read.value != stored).then_some(read.value);
        Ok(FromStorage {
            value,
            stale: read.stale,
        })
    }
}

/// Options of `tessera secrets`.
#[derive(clap::Args, Debug)]
pub struct SecretsArgs {
    #[command(subcommand)]
    command: SecretsCommand,
    #[command(flatten)]
    cluster: crate::client::ClusterArgs,
}

#[derive(clap::Subcommand, Debug)]
enum SecretsCommand {
    /// Rewrite every object of the encrypted resources through the API, so each is stored
    /// with the first key of the running platform's `--encryption-provider-config`; then the
    /// keys after it can be removed.
    Rotate(RotateArgs),
}

#[derive(clap::Args, Debug)]
struct RotateArgs {
    /// The resources to rewrite, as the configuration names them (`secrets`,
    /// `deployments.apps`, `*.apps`, `*.`, `*.*`); repeatable.
    #[arg(long = "resource")]
    resources: Vec<String>,
    /// Take the resources from this EncryptionConfiguration file (the one the platform runs
    /// with); without it and without --resource, `secrets`.
    #[arg(long, value_parser = crate::client::absolute_path)]
    encryption_provider_config: Option<PathBuf>,
}

/// Runs `tessera secrets …`.
pub async fn run(args: &SecretsArgs) -> anyhow::Result<()> {
    match &args.command {
        SecretsCommand::Rotate(rotate) => {
            let mut wanted: Vec<GroupResource> = rotate
                .resources
                .iter()
                .map(|r| GroupResource::parse(r))
                .collect();
            if let Some(path) = &rotate.encryption_provider_config {
                wanted.extend(load_config(path)?.resources().cloned());
            }
            if wanted.is_empty() {
                wanted.push(GroupResource::parse("secrets"));
            }
            let client = crate::client::connect(&args.cluster).await?;
            let report = rotate_resources(client, &wanted).await?;
            println!("{report}");
            Ok(())
        }
    }
}

/// What a rotation did.
#[derive(Debug, Default)]
struct Report {
    rewritten: Vec<(String, usize)>,
    retried: usize,
    gone: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .rewritten
            .iter()
            .map(|(resource, count)| format!("{count} {resource}"))
            .collect();
        write!(f, "rewrote {}", parts.join(", "))?;
        if self.retried > 0 {
            write!(f, "; {} retried after a concurrent update", self.retried)?;
        }
        if self.gone > 0 {
            write!(f, "; {} deleted meanwhile", self.gone)?;
        }
        Ok(())
    }
}

fn matches(wanted: &[GroupResource], group: &str, plural: &str) -> bool {
    wanted.iter().any(|w| {
        (w.group == "*" || w.group == group) && (w.resource == "*" || w.resource == plural)
    })
}

async fn rotate_resources(
    client: kube::Client,
    wanted: &[GroupResource],
) -> anyhow::Result<Report> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("discover the served resources")?;
    let mut report = Report::default();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            if !matches(wanted, &resource.group, &resource.plural)
                || !capabilities.supports_operation(verbs::LIST)
                || !capabilities.supports_operation(verbs::UPDATE)
            {
                continue;
            }
            let namespaced = capabilities.scope == Scope::Namespaced;
            let count = rewrite_all(&client, &resource, namespaced, &mut report).await?;
            let name = if resource.group.is_empty() {
                resource.plural.clone()
            } else {
                format!("{}.{}", resource.plural, resource.group)
            };
            report.rewritten.push((name, count));
        }
    }
    anyhow::ensure!(
        !report.rewritten.is_empty(),
        "no served resource matches {}",
        wanted
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(report)
}

/// How many times one object's rewrite is retried after concurrent updates.
const ATTEMPTS: usize = 10;

/// Rewrites every object of one resource, each with one compare-and-swap update.
async fn rewrite_all(
    client: &kube::Client,
    resource: &kube::discovery::ApiResource,
    namespaced: bool,
    report: &mut Report,
) -> anyhow::Result<usize> {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let list = all
        .list(&ListParams::default())
        .await
        .with_context(|| format!("list {}", resource.plural))?;
    let mut count = 0;
    for object in list.items {
        let api: Api<DynamicObject> = match (namespaced, object.metadata.namespace.as_deref()) {
            (true, Some(namespace)) => Api::namespaced_with(client.clone(), namespace, resource),
            _ => Api::all_with(client.clone(), resource),
        };
        if rewrite_object(&api, object, report).await? {
            count += 1;
        }
    }
    Ok(count)
}

/// Rewrites one object with a compare-and-swap update carrying the resourceVersion it was
/// read at; when a concurrent writer wins, re-reads it and tries again. `false` when the
/// object was deleted meanwhile.
async fn rewrite_object(
    api: &Api<DynamicObject>,
    mut object: DynamicObject,
    report: &mut Report,
) -> anyhow::Result<bool> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let mut attempt = 0;
    loop {
        attempt += 1;
        match api.replace(&name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < ATTEMPTS => {
                // A concurrent writer won; rewrite what it wrote.
                report.retried += 1;
                match api.get_opt(&name).await? {
                    Some(fresh) => object = fresh,
                    None => {
                        report.gone += 1;
                        return Ok(false);
                    }
                }
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                report.gone += 1;
                return Ok(false);
            }
            Err(error) => {
                let namespace = object
                    .metadata
                    .namespace
                    .as_deref()
                    .map(|n| format!("{n}/"))
                    .unwrap_or_default();
                return Err(error).with_context(|| format!("rewrite {namespace}{name}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_picks_the_resources_the_configuration_names() {
        let wanted: Vec<GroupResource> = ["secrets", "*.apps", "jobs.batch"]
            .iter()
            .map(|r| GroupResource::parse(r))
            .collect();
        // (group, plural, rewritten)
        let table = [
            ("", "secrets", true),
            ("", "configmaps", false),
            ("apps", "deployments", true),
            ("apps", "statefulsets", true),
            ("batch", "jobs", true),
            ("batch", "cronjobs", false),
        ];
        for (group, plural, want) in table {
            assert_eq!(matches(&wanted, group, plural), want, "{group} {plural}");
        }
        let everything = [GroupResource::parse("*.*")];
        assert!(matches(&everything, "kueue.x-k8s.io", "workloads"));
        let core = [GroupResource::parse("*.")];
        assert!(matches(&core, "", "pods"));
        assert!(!matches(&core, "apps", "deployments"));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_concurrent_update_wins_and_the_rewrite_retries_on_top_of_it() {
        let platform = crate::bench_queue_api::Platform::start().expect("platform");
        let secrets =
            kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
        platform
            .create(
                &secrets,
                "default",
                serde_json::json!({"metadata": {"name": "db"}, "data": {"password": "aHVudGVy"}}),
            )
            .await
            .expect("create");
        let api = platform.api(&secrets, "default");
        let listed = api.get("db").await.expect("get");
        // Another client updates the Secret after the rotation listed it.
        let mut newer = listed.clone();
        newer.metadata.labels = Some([("writer".to_string(), "won".to_string())].into());
        api.replace("db", &PostParams::default(), &newer)
            .await
            .expect("concurrent update");
        let mut report = Report::default();
        let rewritten = rewrite_object(&api, listed, &mut report)
            .await
            .expect("rewrite");
        assert!(rewritten);
        assert_eq!((report.retried, report.gone), (1, 0));
        let now = api.get("db").await.expect("get");
        let labels = now.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("writer").map(String::as_str),
            Some("won"),
            "the writer's change stays"
        );
        assert_eq!(now.data["data"]["password"], "aHVudGVy");
        // Deleted meanwhile: nothing to rewrite, not an error.
        api.delete("db", &Default::default()).await.expect("delete");
        let mut report = Report::default();
        assert!(!rewrite_object(&api, now, &mut report).await.expect("gone"));
        assert_eq!(report.gone, 1);
    }

    #[test]
    fn values_reach_the_store_encrypted_and_come_back_plain() {
        let secret = "k8s:enc:";
        let text = "apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys: [{name: key1, secret: AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=}]
      - identity: {}
";
        let config = EncryptionConfig::parse("enc.yaml", text).expect("valid");
        let store = transformer(config);
        let key = "/core/secrets/default/db";
        let value = br#"{"data":{"password":"aHVudGVyMg=="}}"#;
        let stored = store
            .transform_to_storage(key, value)
            .expect("sealed")
            .expect("encrypted");
        assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
        let again = store
            .transform_to_storage(key, value)
            .expect("sealed")
            .expect("encrypted");
        assert_ne!(stored, again, "a fresh nonce each write");
        let read = store.transform_from_storage(key, &stored).expect("opened");
        assert_eq!(read.value.as_deref(), Some(&value[..]));
        assert!(!read.stale);
        // Another resource is stored as it is, and read without a copy.
        let pod = "/core/pods/default/p";
        assert_eq!(store.transform_to_storage(pod, value).expect("plain"), None);
        let read = store.transform_from_storage(pod, value).expect("plain");
        assert_eq!((read.value, read.stale), (None, false));
        // A plain Secret from before encryption is read by identity, and stale.
        let read = store
            .transform_from_storage(key, value)
            .expect("plain secret");
        assert!(read.stale && read.value.is_none());
        assert!(
            store
                .transform_from_storage(pod, secret.as_bytes())
                .is_err()
        );
    }
}
