//! The models a pod asks for, read from its spec in the two ways users write them:
//!
//! - a CSI ephemeral volume of the model driver ([`MODEL_CSI_DRIVER`]), as node-local model
//!   stores such as GPUStack's `model.csi.gpustack.ai` are used:
//!
//!   ```yaml
//!   volumes:
//!   - name: weights
//!     csi:
//!       driver: model.csi.tessera.dev
//!       readOnly: true
//!       volumeAttributes: {model: org/name, revision: main}
//!   ```
//!
//! - KServe's storage initializer: an init container named `storage-initializer` whose first
//!   argument is the storage URI (`hf://org/name[:revision]` or `s3://<bucket>/org/name/<revision>`)
//!   and whose second is the directory it fills (KServe's `/mnt/models`).
//!
//! It also holds the name a node lists a cached model under in `status.images` and the
//! ModelLocality score that prefers nodes already holding a pod's models. It reads JSON and
//! returns values: it knows nothing of caches, stores, downloads or the scheduler's profiles.

use serde_json::Value;
use tessera_cache::hf_layout::Repo;
use thiserror::Error;

/// The CSI driver name of model volumes.
pub const MODEL_CSI_DRIVER: &str = "model.csi.tessera.dev";
/// KServe's storage initializer container name (its `ClusterStorageContainer` requires it).
pub const STORAGE_INITIALIZER: &str = "storage-initializer";
/// The revision a model reference without one means (the Hub's default branch).
pub const DEFAULT_REVISION: &str = "main";
/// The prefix of the `status.images` names under which a node lists the models it caches.
pub const NODE_IMAGE_PREFIX: &str = "model.tessera.dev/";

/// One model at one revision.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelRef {
    /// The Hugging Face repository id, `org/name` or `name`.
    pub repo: String,
    /// A branch, tag or commit.
    pub revision: String,
}

impl ModelRef {
    /// A checked reference: the repo id as `huggingface_hub`'s `validate_repo_id`, the revision
    /// as a relative path. `field` names where it was read, for the error.
    pub fn new(field: &str, repo: &str, revision: &str) -> Result<Self, ModelRequestError> {
        let refused = |e: tessera_cache::hf_layout::LayoutError| ModelRequestError {
            field: field.to_owned(),
            reason: e.to_string(),
        };
        let checked = Repo::model(repo).map_err(refused)?;
        checked.reference(revision).map_err(refused)?;
        Ok(Self {
            repo: repo.to_owned(),
            revision: revision.to_owned(),
        })
    }

    /// The name a node lists this model under in `status.images`:
    /// `model.tessera.dev/<repo>:<revision>`.
    pub fn node_image_name(&self) -> String {
        format!("{NODE_IMAGE_PREFIX}{}:{}", self.repo, self.revision)
    }

    /// Reads back a [`Self::node_image_name`]; `None` for any other image name.
    pub fn from_node_image_name(name: &str) -> Option<Self> {
        let rest = name.strip_prefix(NODE_IMAGE_PREFIX)?;
        let (repo, revision) = rest.rsplit_once(':')?;
        Self::new("status.images", repo, revision).ok()
    }
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.repo, self.revision)
    }
}

/// Where in the pod a model was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A CSI ephemeral volume of [`MODEL_CSI_DRIVER`], by volume name.
    Volume { name: String },
    /// KServe's storage initializer init container, filling `destination`.
    StorageInitializer { destination: String },
}

/// One model a pod needs before its containers start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRequest {
    pub model: ModelRef,
    pub source: ModelSource,
    /// The storage URI's bucket, for an `s3://` URI.
    pub bucket: Option<String>,
}

/// A pod's model request that cannot be read, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {reason}")]
pub struct ModelRequestError {
    pub field: String,
    pub reason: String,
}

fn refuse(field: impl Into<String>, reason: impl Into<String>) -> ModelRequestError {
    ModelRequestError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The models `pod` asks for, in spec order (volumes first, then the storage initializer); the
/// first unreadable request is the error.
pub fn pod_models(pod: &Value) -> Result<Vec<ModelRequest>, ModelRequestError> {
    let mut requests = Vec::new();
    let volumes = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, volume) in volumes.iter().enumerate() {
        if volume.pointer("/csi/driver").and_then(Value::as_str) != Some(MODEL_CSI_DRIVER) {
            continue;
        }
        let field = format!("spec.volumes[{index}].csi.volumeAttributes");
        let attribute = |key: &str| {
            volume
                .pointer(&format!("/csi/volumeAttributes/{key}"))
                .and_then(Value::as_str)
        };
        let Some(repo) = attribute("model") else {
            return Err(refuse(
                format!("{field}.model"),
                "Required value: the model's repository id (org/name)",
            ));
        };
        let revision = attribute("revision").unwrap_or(DEFAULT_REVISION);
        let name = volume
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        requests.push(ModelRequest {
            model: ModelRef::new(&format!("{field}.model"), repo, revision)?,
            source: ModelSource::Volume {
                name: name.to_owned(),
            },
            bucket: None,
        });
    }
    let init_containers = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, container) in init_containers.iter().enumerate() {
        if container.get("name").and_then(Value::as_str) != Some(STORAGE_INITIALIZER) {
            continue;
        }
        let field = format!("spec.initContainers[{index}].args");
        let args: Vec<&str> = container
            .get("args")
            .and_then(Value::as_array)
            .map(|args| args.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let [uri, destination, ..] = args.as_slice() else {
            return Err(refuse(
                field,
                "Required value: the storage URI and the destination directory",
            ));
        };
        let (model, bucket) = parse_storage_uri(&format!("{field}[0]"), uri)?;
        requests.push(ModelRequest {
            model,
            source: ModelSource::StorageInitializer {
                destination: (*destination).to_owned(),
            },
            bucket,
        });
    }
    Ok(requests)
}

/// Reads a storage URI: `hf://org/name[:revision]` (KServe's Hugging Face form) or
/// `s3://<bucket>/org/name[/<revision>]` (the model store's layout), with the bucket for the
/// latter. Other schemes are refused naming those two.
pub fn parse_storage_uri(
    field: &str,
    uri: &str,
) -> Result<(ModelRef, Option<String>), ModelRequestError> {
    if let Some(rest) = uri.strip_prefix("hf://") {
        let (repo, revision) = match rest.split_once(':') {
            Some((repo, revision)) => (repo, revision),
            None => (rest, DEFAULT_REVISION),
        };
        return Ok((ModelRef::new(field, repo, revision)?, None));
    }
    if let Some(rest) = uri.strip_prefix("s3://") {
        let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
        let (bucket, repo, revision) = match parts.as_slice() {
            [bucket, org, name] => (*bucket, format!("{org}/{name}"), DEFAULT_REVISION),
            [bucket, org, name, revision] => (*bucket, format!("{org}/{name}"), *revision),
            _ => {
                return Err(refuse(
                    field,
                    format!(
                        "Invalid value: {uri:?}: an s3 model URI is s3://<bucket>/<org>/<name>[/<revision>]"
                    ),
                ));
            }
        };
        if bucket.is_empty() {
            return Err(refuse(
                field,
                format!("Invalid value: {uri:?}: empty bucket"),
            ));
        }
        return Ok((
            ModelRef::new(field, &repo, revision)?,
            Some(bucket.to_owned()),
        ));
    }
    Err(refuse(
        field,
        format!("Unsupported value: {uri:?}: supported schemes: \"hf://\", \"s3://\""),
    ))
}

/// The models a node lists in `status.images` with their sizes in bytes.
pub fn node_models(node: &Value) -> Vec<(ModelRef, u64)> {
    let images = node
        .pointer("/status/images")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut models = Vec::new();
    for image in images {
        let size = image
            .get("sizeBytes")
            .and_then(Value::as_u64)
            .unwrap_or_default();
        let names = image
            .get("names")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if let Some(model) = names
            .iter()
            .filter_map(Value::as_str)
            .find_map(ModelRef::from_node_image_name)
        {
            models.push((model, size));
        }
    }
    models
}

/// The highest score a node gets, as kube-scheduler's `MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// ModelLocality: the share of the pod's model bytes the node already holds, scaled to
/// `0..=MAX_NODE_SCORE`. `wanted` are the pod's models with their sizes as the cluster knows
/// them (a model no node lists counts with size 1, so holding it still matters); `held` is what
/// the node lists. Unlike ImageLocality no spread factor damps the score: a model is large enough
/// that loading it again costs more than concentrating replicas does.
pub fn model_locality_score(wanted: &[(ModelRef, u64)], held: &[(ModelRef, u64)]) -> i64 {
    let total: u128 = wanted
        .iter()
        .map(|(_, size)| u128::from((*size).max(1)))
        .sum();
    if total == 0 {
        return 0;
    }
    let present: u128 = wanted
        .iter()
        .filter(|(model, _)| held.iter().any(|(h, _)| h == model))
        .map(|(_, size)| u128::from((*size).max(1)))
        .sum();
    let score = present * MAX_NODE_SCORE as u128 / total;
    i64::try_from(score).unwrap_or(MAX_NODE_SCORE)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn model(repo: &str, revision: &str) -> ModelRef {
        ModelRef {
            repo: repo.to_owned(),
            revision: revision.to_owned(),
        }
    }

    #[test]
    fn storage_uris() {
        struct Case {
            uri: &'static str,
            want: Result<(ModelRef, Option<&'static str>), &'static str>,
        }
        let cases = [
            Case {
                uri: "hf://meta-llama/Llama-3.1-8B",
                want: Ok((model("meta-llama/Llama-3.1-8B", "main"), None)),
            },
            Case {
                uri: "hf://org/name:v1.0",
                want: Ok((model("org/name", "v1.0"), None)),
            },
            Case {
                uri: "s3://models/org/name/main/",
                want: Ok((model("org/name", "main"), Some("models"))),
            },
            Case {
                uri: "s3://models/org/name",
                want: Ok((model("org/name", "main"), Some("models"))),
            },
            Case {
                uri: "s3://models/name",
                want: Err("an s3 model URI is s3://<bucket>/<org>/<name>[/<revision>]"),
            },
            Case {
                uri: "s3:///org/name/main",
                want: Err("empty bucket"),
            },
            Case {
                uri: "gs://bucket/org/name",
                want: Err("supported schemes: \"hf://\", \"s3://\""),
            },
            Case {
                uri: "hf://org--x/name",
                want: Err("Cannot have -- or .. in repo_id"),
            },
            Case {
                uri: "hf://org/name:../etc",
                want: Err("'.' or '..' segment"),
            },
        ];
        for case in cases {
            let got = parse_storage_uri("f", case.uri);
            match (got, case.want) {
                (Ok((model, bucket)), Ok((want_model, want_bucket))) => {
                    assert_eq!(model, want_model, "{}", case.uri);
                    assert_eq!(bucket.as_deref(), want_bucket, "{}", case.uri);
                }
                (Err(error), Err(reason)) => {
                    assert_eq!(error.field, "f");
                    assert!(
                        error.reason.contains(reason),
                        "{}: {} lacks {reason}",
                        case.uri,
                        error.reason
                    );
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", case.uri),
            }
        }
    }

    #[test]
    fn a_pod_names_models_by_volume_and_storage_initializer() {
        let pod = json!({"spec": {
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "weights", "csi": {"driver": MODEL_CSI_DRIVER, "readOnly": true,
                    "volumeAttributes": {"model": "org/llm", "revision": "v2"}}},
                {"name": "other", "csi": {"driver": "other.csi.example.com"}},
                {"name": "tok", "csi": {"driver": MODEL_CSI_DRIVER,
                    "volumeAttributes": {"model": "org/tokenizer"}}},
            ],
            "initContainers": [
                {"name": "setup", "args": ["hf://ignored/x", "/tmp"]},
                {"name": STORAGE_INITIALIZER, "args": ["s3://models/org/llm/v2", "/mnt/models"]},
            ],
        }});
        let got = pod_models(&pod).expect("readable");
        assert_eq!(
            got,
            vec![
                ModelRequest {
                    model: model("org/llm", "v2"),
                    source: ModelSource::Volume {
                        name: "weights".into()
                    },
                    bucket: None,
                },
                ModelRequest {
                    model: model("org/tokenizer", "main"),
                    source: ModelSource::Volume { name: "tok".into() },
                    bucket: None,
                },
                ModelRequest {
                    model: model("org/llm", "v2"),
                    source: ModelSource::StorageInitializer {
                        destination: "/mnt/models".into()
                    },
                    bucket: Some("models".into()),
                },
            ]
        );
        assert_eq!(
            pod_models(&json!({"spec": {"containers": []}})),
            Ok(Vec::new())
        );
    }

    #[test]
    fn unreadable_requests_name_their_field() {
        let cases = [
            (
                json!({"spec": {"volumes": [{"name": "a", "emptyDir": {}},
                    {"name": "w", "csi": {"driver": MODEL_CSI_DRIVER}}]}}),
                "spec.volumes[1].csi.volumeAttributes.model",
                "Required value",
            ),
            (
                json!({"spec": {"volumes": [{"name": "w", "csi": {"driver": MODEL_CSI_DRIVER,
                    "volumeAttributes": {"model": "-bad/name"}}}]}}),
                "spec.volumes[0].csi.volumeAttributes.model",
                "alphanumeric",
            ),
            (
                json!({"spec": {"initContainers": [{"name": STORAGE_INITIALIZER,
                    "args": ["hf://org/name"]}]}}),
                "spec.initContainers[0].args",
                "destination",
            ),
            (
                json!({"spec": {"initContainers": [{"name": STORAGE_INITIALIZER,
                    "args": ["ftp://x/y/z", "/mnt/models"]}]}}),
                "spec.initContainers[0].args[0]",
                "Unsupported value",
            ),
        ];
        for (pod, field, reason) in cases {
            let error = pod_models(&pod).expect_err("refused");
            assert_eq!(error.field, field);
            assert!(error.reason.contains(reason), "{error}");
        }
    }

    #[test]
    fn node_image_names_round_trip() {
        let llm = model("org/llm", "v2");
        assert_eq!(llm.node_image_name(), "model.tessera.dev/org/llm:v2");
        assert_eq!(
            ModelRef::from_node_image_name(&llm.node_image_name()),
            Some(llm)
        );
        assert_eq!(
            ModelRef::from_node_image_name("registry.k8s.io/pause:3.10"),
            None
        );
        assert_eq!(
            ModelRef::from_node_image_name("model.tessera.dev/bad..id:main"),
            None
        );
        let node = json!({"status": {"images": [
            {"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 700},
            {"names": ["model.tessera.dev/org/llm:v2"], "sizeBytes": 5_000_000_000_u64},
        ]}});
        assert_eq!(
            node_models(&node),
            vec![(model("org/llm", "v2"), 5_000_000_000)]
        );
    }

    #[test]
    fn locality_is_the_share_of_bytes_held() {
        let llm = (model("org/llm", "main"), 9_000);
        let tok = (model("org/tok", "main"), 1_000);
        let unknown = (model("org/new", "main"), 0);
        let both = vec![llm.clone(), tok.clone()];
        type Sized = Vec<(ModelRef, u64)>;
        let cases: [(Sized, Sized, i64); 6] = [
            (vec![], vec![], 0),
            (both.clone(), vec![], 0),
            (both.clone(), vec![tok.clone()], 10),
            (both.clone(), vec![llm.clone()], 90),
            (both.clone(), vec![tok.clone(), llm.clone()], 100),
            (vec![unknown.clone()], vec![unknown], 100),
        ];
        for (wanted, held, want) in cases {
            assert_eq!(
                model_locality_score(&wanted, &held),
                want,
                "{wanted:?} {held:?}"
            );
        }
        // Another revision of the same repository is another model.
        assert_eq!(
            model_locality_score(&[llm], &[(model("org/llm", "v2"), 9_000)]),
            0
        );
    }
}
