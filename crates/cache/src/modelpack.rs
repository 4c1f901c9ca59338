//! The model store's layout and its ModelPack view (issue 21, deliverable 2).
//!
//! A model is a Hugging Face repository's files stored under the key
//! `<org>/<name>/<revision>/<path>` of bucket [`BUCKET`] ([`object_key`], [`split_object_key`]).
//! The same files, given their sha256 and size, form a ModelPack artifact
//! (`modelpack/model-spec`, `docs/spec.md`, `specs-go/v1/mediatype.go`): an OCI image manifest
//! with `artifactType` [`ARTIFACT_TYPE`], a config blob ([`CONFIG_MEDIA_TYPE`]) and one
//! uncompressed layer per file, annotated with its path ([`ANNOTATION_FILEPATH`]) and typed by
//! [`layer_media_type`]. [`build`] makes both documents as bytes with their digests; the OCI
//! distribution paths a registry client sends are read by [`parse_oci_path`], and a `Range`
//! header by [`byte_range`].
//!
//! Pure: nothing here reads a file, hashes content or knows the store's server; the shell
//! hands in each file's sha256 and size from its index and serves what this returns.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::hf_layout::{LayoutError, Repo, check_relative};
use crate::{is_lower_hex, sha256_hex};

/// The bucket models live in.
pub const BUCKET: &str = "models";
/// The OCI image manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// ModelPack's `ArtifactTypeModelManifest`.
pub const ARTIFACT_TYPE: &str = "application/vnd.cncf.model.manifest.v1+json";
/// ModelPack's `MediaTypeModelConfig`.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.model.config.v1+json";
/// ModelPack's `MediaTypeModelWeightRaw`: unarchived, uncompressed weights.
pub const WEIGHT_RAW: &str = "application/vnd.cncf.model.weight.v1.raw";
/// ModelPack's `MediaTypeModelWeightConfigRaw`: `config.json`, tokenizer files.
pub const WEIGHT_CONFIG_RAW: &str = "application/vnd.cncf.model.weight.config.v1.raw";
/// ModelPack's `MediaTypeModelDocRaw`: README, licence.
pub const DOC_RAW: &str = "application/vnd.cncf.model.doc.v1.raw";
/// ModelPack's `MediaTypeModelCodeRaw`: everything else.
pub const CODE_RAW: &str = "application/vnd.cncf.model.code.v1.raw";
/// ModelPack's layer annotation naming the file's path in the model.
pub const ANNOTATION_FILEPATH: &str = "org.cncf.model.filepath";

/// Why a key, model, file list or path is refused, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModelPackError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("invalid {field} {value:?}: {reason}")]
    Invalid {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
}

fn invalid(field: &'static str, value: &str, reason: &'static str) -> ModelPackError {
    ModelPackError::Invalid {
        field,
        value: value.to_owned(),
        reason,
    }
}

/// One revision of one model: `org/name` (a Hugging Face repo id with an organisation) and a
/// revision (a branch, tag or commit: one path segment).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelRef {
    pub org: String,
    pub name: String,
    pub revision: String,
}

impl ModelRef {
    /// Checks `id` (`org/name`) as a Hugging Face repo id with an organisation, and the
    /// revision as one segment without `/`, `.` or `..`.
    pub fn new(id: &str, revision: &str) -> Result<Self, ModelPackError> {
        Repo::model(id)?;
        let Some((org, name)) = id.split_once('/') else {
            return Err(invalid("model", id, "must be org/name"));
        };
        check_revision(revision)?;
        Ok(Self {
            org: org.to_owned(),
            name: name.to_owned(),
            revision: revision.to_owned(),
        })
    }

    /// `org/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.org, self.name)
    }

    /// The key prefix of this revision's files: `org/name/revision/`.
    pub fn prefix(&self) -> String {
        format!("{}/{}/{}/", self.org, self.name, self.revision)
    }
}

fn check_revision(revision: &str) -> Result<(), ModelPackError> {
    check_relative("revision", revision)?;
    if revision.contains('/') {
        return Err(invalid("revision", revision, "must be one path segment"));
    }
    if revision.len() > 128 {
        return Err(invalid("revision", revision, "longer than 128 characters"));
    }
    Ok(())
}

/// The object key of `path` in `model`: `org/name/revision/path`.
pub fn object_key(model: &ModelRef, path: &str) -> Result<String, ModelPackError> {
    check_relative("file path", path)?;
    Ok(format!("{}{path}", model.prefix()))
}

/// The model and file path an object key of the layout names; `None` for a key outside it
/// (fewer than four segments, or an org/name/revision that does not validate).
pub fn split_object_key(key: &str) -> Option<(ModelRef, String)> {
    let mut parts = key.splitn(4, '/');
    let (org, name, revision, path) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    check_relative("file path", path).ok()?;
    let model = ModelRef::new(&format!("{org}/{name}"), revision).ok()?;
    Some((model, path.to_owned()))
}

/// A file of a model revision as the store's index records it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ModelFile {
    /// The path in the repository (`model-00001-of-00002.safetensors`, `onnx/model.onnx`).
    pub path: String,
    /// Lower-case hex sha256 of the content.
    pub sha256: String,
    pub size: u64,
}

/// The ModelPack layer media type of a file by its path: weights (`*.safetensors`, `*.bin`,
/// `*.gguf`, `*.pt`, `*.pth`), weight configuration (`*.json`, `tokenizer.model`, `*.tiktoken`,
/// `merges.txt`, `vocab.txt`), documentation (`README*`, `LICENSE*`, `LICENCE*`, `NOTICE*`,
/// `*.md`), else code.
pub fn layer_media_type(path: &str) -> &'static str {
    let file = path.rsplit('/').next().unwrap_or(path);
    let lower = file.to_ascii_lowercase();
    let extension = lower.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    if matches!(extension, "safetensors" | "bin" | "gguf" | "pt" | "pth") {
        WEIGHT_RAW
    } else if matches!(extension, "json" | "tiktoken")
        || matches!(
            lower.as_str(),
            "tokenizer.model" | "merges.txt" | "vocab.txt"
        )
    {
        WEIGHT_CONFIG_RAW
    } else if ["readme", "license", "licence", "notice"]
        .iter()
        .any(|p| lower.starts_with(p))
        || extension == "md"
    {
        DOC_RAW
    } else {
        CODE_RAW
    }
}

/// The weights' format for the config: `safetensors`, `gguf` or `pytorch` by the weight files
/// present (the first found in that order), none without weights.
fn weight_format(files: &[ModelFile]) -> Option<&'static str> {
    let has = |ext: &[&str]| {
        files.iter().any(|f| {
            let lower = f.path.to_ascii_lowercase();
            ext.iter().any(|e| lower.ends_with(e))
        })
    };
    if has(&[".safetensors"]) {
        Some("safetensors")
    } else if has(&[".gguf"]) {
        Some("gguf")
    } else if has(&[".bin", ".pt", ".pth"]) {
        Some("pytorch")
    } else {
        None
    }
}

/// A model revision's ModelPack artifact: the config and manifest documents, byte for byte as
/// served, with their `sha256:` digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub config: Vec<u8>,
    pub config_digest: String,
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// The artifact of `model` made of `files` (in path order, whatever order they are given in).
/// Refuses an empty list, a path given twice, a bad path and a sha256 that is not 64
/// lower-case hex digits.
pub fn build(model: &ModelRef, files: &[ModelFile]) -> Result<Artifact, ModelPackError> {
    if files.is_empty() {
        return Err(invalid(
            "model",
            &format!("{}:{}", model.id(), model.revision),
            "has no files",
        ));
    }
    let mut sorted: Vec<&ModelFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut seen = BTreeSet::new();
    for file in &sorted {
        check_relative("file path", &file.path)?;
        if !seen.insert(file.path.as_str()) {
            return Err(invalid("file path", &file.path, "listed twice"));
        }
        if !is_lower_hex(&file.sha256, 64) {
            return Err(invalid(
                "sha256",
                &file.sha256,
                "not 64 lower-case hex digits",
            ));
        }
    }
    let diff_ids: Vec<String> = sorted
        .iter()
        .map(|f| format!("sha256:{}", f.sha256))
        .collect();
    let mut technical = Map::new();
    if let Some(format) = weight_format(files) {
        technical.insert("format".into(), Value::from(format));
    }
    let config = json!({
        "descriptor": {"name": model.id(), "revision": model.revision},
        "config": technical,
        "modelfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let config = serde_json::to_vec(&config).unwrap_or_default();
    let config_digest = digest(&config);
    let layers: Vec<Value> = sorted
        .iter()
        .map(|f| {
            json!({
                "mediaType": layer_media_type(&f.path),
                "digest": format!("sha256:{}", f.sha256),
                "size": f.size,
                "annotations": {ANNOTATION_FILEPATH: f.path},
            })
        })
        .collect();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len()},
        "layers": layers,
        "annotations": {
            "org.opencontainers.image.title": model.id(),
            "org.opencontainers.image.revision": model.revision,
        },
    });
    let manifest = serde_json::to_vec(&manifest).unwrap_or_default();
    let manifest_digest = digest(&manifest);
    Ok(Artifact {
        config,
        config_digest,
        manifest,
        manifest_digest,
    })
}

/// A request of the read-only OCI distribution API (`/v2/…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OciRoute {
    /// `GET /v2/`: the API version check.
    Ping,
    /// `/v2/<org>/<name>/manifests/<reference>`: a revision, or a manifest digest.
    Manifest {
        org: String,
        name: String,
        reference: String,
    },
    /// `/v2/<org>/<name>/blobs/sha256:<hex>`.
    Blob {
        org: String,
        name: String,
        sha256: String,
    },
}

/// The OCI route of a request path; `Ok(None)` when the path is not under `/v2/` (an S3
/// request), an error naming what is wrong when it is but does not read.
pub fn parse_oci_path(path: &str) -> Result<Option<OciRoute>, ModelPackError> {
    if path == "/v2" || path == "/v2/" {
        return Ok(Some(OciRoute::Ping));
    }
    let Some(rest) = path.strip_prefix("/v2/") else {
        return Ok(None);
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let [org, name, kind, reference] = parts.as_slice() else {
        return Err(invalid(
            "OCI path",
            path,
            "expected /v2/<org>/<name>/manifests/<reference> or /v2/<org>/<name>/blobs/<digest>",
        ));
    };
    Repo::model(&format!("{org}/{name}"))?;
    let (org, name) = ((*org).to_owned(), (*name).to_owned());
    match *kind {
        "manifests" => {
            if let Some(hex) = reference.strip_prefix("sha256:") {
                if !is_lower_hex(hex, 64) {
                    return Err(invalid(
                        "digest",
                        reference,
                        "not sha256:<64 lower-case hex>",
                    ));
                }
            } else {
                check_revision(reference)?;
            }
            Ok(Some(OciRoute::Manifest {
                org,
                name,
                reference: (*reference).to_owned(),
            }))
        }
        "blobs" => match reference.strip_prefix("sha256:") {
            Some(hex) if is_lower_hex(hex, 64) => Ok(Some(OciRoute::Blob {
                org,
                name,
                sha256: hex.to_owned(),
            })),
            _ => Err(invalid(
                "digest",
                reference,
                "not sha256:<64 lower-case hex>",
            )),
        },
        _ => Err(invalid("OCI path", path, "neither manifests nor blobs")),
    }
}

/// What a `Range` header asks of a body of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// No header, or one this answer ignores (several ranges, another unit, bad syntax):
    /// the whole body, 200.
    Full,
    /// Bytes `start..=end`: 206 with `Content-Range: bytes start-end/len`.
    Partial { start: u64, end: u64 },
    /// Nothing of the body: 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// Reads one `bytes=` range as RFC 9110 does: `a-b` (b clamped to the end), `a-`, and the
/// suffix `-n` (the last n bytes).
pub fn byte_range(header: Option<&str>, len: u64) -> ByteRange {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return ByteRange::Full;
    };
    if spec.contains(',') {
        return ByteRange::Full;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return ByteRange::Full;
    };
    let number = |s: &str| s.trim().parse::<u64>().ok();
    match (first.trim().is_empty(), last.trim().is_empty()) {
        (true, true) => ByteRange::Full,
        (true, false) => match number(last) {
            Some(0) => ByteRange::Unsatisfiable,
            Some(n) if len > 0 => ByteRange::Partial {
                start: len.saturating_sub(n),
                end: len - 1,
            },
            Some(_) => ByteRange::Unsatisfiable,
            None => ByteRange::Full,
        },
        (false, open) => {
            let Some(start) = number(first) else {
                return ByteRange::Full;
            };
            let end = if open { Some(u64::MAX) } else { number(last) };
            match end {
                None => ByteRange::Full,
                Some(end) if end < start => ByteRange::Full,
                Some(_) if start >= len => ByteRange::Unsatisfiable,
                Some(end) => ByteRange::Partial {
                    start,
                    end: end.min(len - 1),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelRef {
        ModelRef::new("acme/tiny-llm", "main").unwrap()
    }

    fn file(path: &str, fill: char, size: u64) -> ModelFile {
        ModelFile {
            path: path.to_owned(),
            sha256: fill.to_string().repeat(64),
            size,
        }
    }

    #[test]
    fn keys_of_the_layout() {
        let model = model();
        assert_eq!(model.prefix(), "acme/tiny-llm/main/");
        assert_eq!(
            object_key(&model, "onnx/model.onnx").unwrap(),
            "acme/tiny-llm/main/onnx/model.onnx"
        );
        for bad in ["", "/abs", "a/../b", "a//b"] {
            assert!(object_key(&model, bad).is_err(), "{bad}");
        }
        assert_eq!(
            split_object_key("acme/tiny-llm/v1.0/onnx/model.onnx"),
            Some((
                ModelRef::new("acme/tiny-llm", "v1.0").unwrap(),
                "onnx/model.onnx".to_owned()
            ))
        );
        for outside in [
            "acme/tiny-llm/main",
            "acme/tiny-llm/main/",
            "a--b/c/main/x",
            "x/y/../z",
        ] {
            assert_eq!(split_object_key(outside), None, "{outside}");
        }
    }

    #[test]
    fn model_refs_are_checked_naming_the_field() {
        for (id, revision, want) in [
            ("tiny-llm", "main", "must be org/name"),
            ("a/b/c", "main", "repo id"),
            ("acme/-x", "main", "repo id"),
            ("acme/x", "refs/pr/1", "one path segment"),
            ("acme/x", "..", "revision"),
            ("acme/x", "", "revision"),
        ] {
            let error = ModelRef::new(id, revision).unwrap_err().to_string();
            assert!(error.contains(want), "{id}:{revision}: {error}");
        }
    }

    #[test]
    fn layer_media_types_by_file() {
        for (path, want) in [
            ("model.safetensors", WEIGHT_RAW),
            ("model-00001-of-00002.safetensors", WEIGHT_RAW),
            ("pytorch_model.bin", WEIGHT_RAW),
            ("q4/model.Q4_K_M.gguf", WEIGHT_RAW),
            ("weights.pt", WEIGHT_RAW),
            ("config.json", WEIGHT_CONFIG_RAW),
            ("tokenizer.json", WEIGHT_CONFIG_RAW),
            ("model.safetensors.index.json", WEIGHT_CONFIG_RAW),
            ("tokenizer.model", WEIGHT_CONFIG_RAW),
            ("merges.txt", WEIGHT_CONFIG_RAW),
            ("README.md", DOC_RAW),
            ("LICENSE", DOC_RAW),
            ("docs/usage.md", DOC_RAW),
            ("modeling_tiny.py", CODE_RAW),
            (".gitattributes", CODE_RAW),
        ] {
            assert_eq!(layer_media_type(path), want, "{path}");
        }
    }

    #[test]
    fn the_manifest_has_one_layer_per_file_in_path_order() {
        let files = [
            file("model.safetensors", 'a', 1000),
            file("config.json", 'b', 20),
            file("README.md", 'c', 5),
        ];
        let artifact = build(&model(), &files).unwrap();
        let manifest: Value = serde_json::from_slice(&artifact.manifest).unwrap();
        assert_eq!(manifest["schemaVersion"], 2);
        assert_eq!(manifest["mediaType"], MANIFEST_MEDIA_TYPE);
        assert_eq!(manifest["artifactType"], ARTIFACT_TYPE);
        assert_eq!(manifest["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(manifest["config"]["digest"], artifact.config_digest);
        assert_eq!(manifest["config"]["size"], artifact.config.len());
        let layers = manifest["layers"].as_array().unwrap();
        let seen: Vec<(&str, &str, u64, &str)> = layers
            .iter()
            .map(|l| {
                (
                    l["annotations"][ANNOTATION_FILEPATH].as_str().unwrap(),
                    l["mediaType"].as_str().unwrap(),
                    l["size"].as_u64().unwrap(),
                    l["digest"].as_str().unwrap(),
                )
            })
            .collect();
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        let c = format!("sha256:{}", "c".repeat(64));
        assert_eq!(
            seen,
            [
                ("README.md", DOC_RAW, 5, c.as_str()),
                ("config.json", WEIGHT_CONFIG_RAW, 20, b.as_str()),
                ("model.safetensors", WEIGHT_RAW, 1000, a.as_str()),
            ]
        );
        let config: Value = serde_json::from_slice(&artifact.config).unwrap();
        assert_eq!(config["descriptor"]["name"], "acme/tiny-llm");
        assert_eq!(config["descriptor"]["revision"], "main");
        assert_eq!(config["config"]["format"], "safetensors");
        assert_eq!(config["modelfs"]["type"], "layers");
        assert_eq!(config["modelfs"]["diff_ids"], json!([c, b, a]));
        assert_eq!(artifact.manifest_digest, digest(&artifact.manifest));
        // The same files in another order make the same bytes.
        let mut reversed = files.clone();
        reversed.reverse();
        assert_eq!(build(&model(), &reversed).unwrap(), artifact);
        // Another revision is another manifest.
        let other = ModelRef::new("acme/tiny-llm", "v2").unwrap();
        assert_ne!(
            build(&other, &files).unwrap().manifest_digest,
            artifact.manifest_digest
        );
    }

    #[test]
    fn build_refuses_what_is_not_a_model() {
        let cases: [(Vec<ModelFile>, &str); 4] = [
            (vec![], "has no files"),
            (
                vec![file("a.bin", 'a', 1), file("a.bin", 'b', 1)],
                "listed twice",
            ),
            (vec![file("../a.bin", 'a', 1)], "file path"),
            (
                vec![ModelFile {
                    path: "a.bin".into(),
                    sha256: "A".repeat(64),
                    size: 1,
                }],
                "sha256",
            ),
        ];
        for (files, want) in cases {
            let error = build(&model(), &files).unwrap_err().to_string();
            assert!(error.contains(want), "{error} lacks {want}");
        }
        let gguf = build(&model(), &[file("m.gguf", 'a', 1)]).unwrap();
        let config: Value = serde_json::from_slice(&gguf.config).unwrap();
        assert_eq!(config["config"]["format"], "gguf");
        let code = build(&model(), &[file("run.py", 'a', 1)]).unwrap();
        let config: Value = serde_json::from_slice(&code.config).unwrap();
        assert_eq!(config["config"], json!({}));
    }

    #[test]
    fn oci_paths() {
        let hex = "d".repeat(64);
        let cases: [(&str, Option<OciRoute>); 5] = [
            ("/v2/", Some(OciRoute::Ping)),
            ("/v2", Some(OciRoute::Ping)),
            ("/models/acme/x/main/config.json", None),
            (
                "/v2/acme/tiny-llm/manifests/main",
                Some(OciRoute::Manifest {
                    org: "acme".into(),
                    name: "tiny-llm".into(),
                    reference: "main".into(),
                }),
            ),
            (
                &format!("/v2/acme/tiny-llm/blobs/sha256:{hex}"),
                Some(OciRoute::Blob {
                    org: "acme".into(),
                    name: "tiny-llm".into(),
                    sha256: hex.clone(),
                }),
            ),
        ];
        for (path, want) in cases {
            assert_eq!(parse_oci_path(path).unwrap(), want, "{path}");
        }
        assert!(matches!(
            parse_oci_path(&format!("/v2/acme/x/manifests/sha256:{hex}")),
            Ok(Some(OciRoute::Manifest { .. }))
        ));
        for (bad, want) in [
            ("/v2/acme/x/blobs/md5:abc", "digest"),
            ("/v2/acme/x/blobs/sha256:ABC", "digest"),
            ("/v2/acme/x/tags/list", "OCI path"),
            ("/v2/acme/manifests/main", "OCI path"),
            ("/v2/ac--me/x/manifests/main", "repo id"),
            ("/v2/acme/x/manifests/..", "revision"),
        ] {
            let error = parse_oci_path(bad).unwrap_err().to_string();
            assert!(error.contains(want), "{bad}: {error}");
        }
    }

    #[test]
    fn byte_ranges() {
        use ByteRange::*;
        for (header, len, want) in [
            (None, 10, Full),
            (Some("bytes=0-3"), 10, Partial { start: 0, end: 3 }),
            (Some("bytes=4-"), 10, Partial { start: 4, end: 9 }),
            (Some("bytes=4-100"), 10, Partial { start: 4, end: 9 }),
            (Some("bytes=-3"), 10, Partial { start: 7, end: 9 }),
            (Some("bytes=-30"), 10, Partial { start: 0, end: 9 }),
            (Some("bytes=10-"), 10, Unsatisfiable),
            (Some("bytes=-0"), 10, Unsatisfiable),
            (Some("bytes=0-0"), 0, Unsatisfiable),
            (Some("bytes=5-2"), 10, Full),
            (Some("bytes=0-1,4-5"), 10, Full),
            (Some("items=0-1"), 10, Full),
            (Some("bytes=x-1"), 10, Full),
        ] {
            assert_eq!(byte_range(header, len), want, "{header:?}");
        }
    }
}
