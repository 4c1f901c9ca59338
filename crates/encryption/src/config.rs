//! kube-apiserver's `--encryption-provider-config` file (`apiserver.config.k8s.io/v1`
//! `EncryptionConfiguration`): reading, upstream's validation (`validation_encryption.go`,
//! with its messages and field paths) and the masking checks of its loader (`config.go`),
//! then the choice of a [`Transformer`] per resource: the exact `resource.group`, else
//! `*.group`, else `*.*`, else identity. A resource named by several rules gets every rule's
//! providers in file order, so the first rule naming it writes.
//!
//! Tessera supports the `aesgcm`, `aescbc`, `secretbox` and `identity` providers; a `kms`
//! provider is refused (no KMS plugin can be reached from a core, and Tessera runs none).
//! Knows nothing of files (the shell reads the text and names it) nor of the store.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use serde::Deserialize;

use crate::transform::{
    AES_KEY_SIZES, AESCBC_PREFIX, AESGCM_PREFIX, Cipher, Key, Provider, SECRETBOX_KEY_SIZES,
    SECRETBOX_PREFIX, TransformError, Transformer,
};

/// The apiVersion of the file.
pub const API_VERSION: &str = "apiserver.config.k8s.io/v1";
/// The kind of the file.
pub const KIND: &str = "EncryptionConfiguration";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Option<Vec<ResourceConfiguration>>,
}

#[derive(Deserialize)]
struct ResourceConfiguration {
    #[serde(default)]
    resources: Option<Vec<String>>,
    #[serde(default)]
    providers: Option<Vec<ProviderConfiguration>>,
}

#[derive(Deserialize)]
struct ProviderConfiguration {
    #[serde(default)]
    aesgcm: Option<KeysConfiguration>,
    #[serde(default)]
    aescbc: Option<KeysConfiguration>,
    #[serde(default)]
    secretbox: Option<KeysConfiguration>,
    #[serde(default)]
    identity: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    kms: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct KeysConfiguration {
    #[serde(default)]
    keys: Option<Vec<KeyConfiguration>>,
}

#[derive(Deserialize)]
struct KeyConfiguration {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// A group and resource as upstream's `schema.ParseGroupResource` reads `resource.group`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    /// The API group (`""` for the core group, `"*"` for any).
    pub group: String,
    /// The resource (plural, lower case; `"*"` for any).
    pub resource: String,
}

impl GroupResource {
    /// Parses `resource.group` (`secrets`, `deployments.apps`, `*.apps`, `*.`, `*.*`).
    pub fn parse(text: &str) -> GroupResource {
        match text.split_once('.') {
            Some((resource, group)) => GroupResource {
                group: group.into(),
                resource: resource.into(),
            },
            None => GroupResource {
                group: String::new(),
                resource: text.into(),
            },
        }
    }

    fn new(group: &str, resource: &str) -> GroupResource {
        GroupResource {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    /// As upstream prints it in the loader's errors (`*.` for the whole core group).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            if self.resource == "*" {
                return f.write_str("*.");
            }
            return f.write_str(&self.resource);
        }
        write!(f, "{}.{}", self.resource, self.group)
    }
}

/// One problem in the file: where, which field, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The 1-based line of the field, when it can be found.
    pub line: Option<usize>,
    /// The field path (`resources[0].providers[1].aesgcm.keys[0].secret`).
    pub field: String,
    /// Upstream's message, with its `Required value:`/`Invalid value:` lead.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// Why a configuration file was refused: every problem found, each with its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {}", list(.errors))]
pub struct ConfigError {
    /// The file, as the caller named it.
    pub source_name: String,
    /// The problems, in file order.
    pub errors: Vec<FieldError>,
}

fn list(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => many
            .iter()
            .map(|e| format!("\n  {e}"))
            .collect::<Vec<_>>()
            .join(""),
    }
}

/// A loaded configuration: the transformer of every resource it names.
#[derive(Debug, Clone)]
pub struct EncryptionConfig {
    by_resource: BTreeMap<GroupResource, Transformer>,
    identity: Transformer,
}

impl Default for EncryptionConfig {
    /// No configuration: every resource stored as it is.
    fn default() -> Self {
        EncryptionConfig {
            by_resource: BTreeMap::new(),
            identity: Transformer::identity(),
        }
    }
}

impl EncryptionConfig {
    /// Reads and validates the text of a configuration file named `source_name`.
    pub fn parse(source_name: &str, text: &str) -> Result<EncryptionConfig, ConfigError> {
        let fail = |errors: Vec<FieldError>| ConfigError {
            source_name: source_name.into(),
            errors,
        };
        let at = |field: &str, message: String| FieldError {
            line: tessera_model::yaml_location::line_of(text, field),
            field: field.into(),
            message,
        };
        if text.trim().is_empty() {
            return Err(fail(vec![FieldError {
                line: None,
                field: String::new(),
                message: format!("encryption provider configuration file {source_name:?} is empty"),
            }]));
        }
        let file: File = serde_saphyr::from_str(text).map_err(|error| {
            fail(vec![FieldError {
                line: None,
                field: String::new(),
                message: format!(
                    "error decoding encryption provider configuration file {source_name:?}: {error}"
                ),
            }])
        })?;
        if file.api_version != API_VERSION || file.kind != KIND {
            let hint = if file.kind == "EncryptionConfig" {
                " (the older `kind: EncryptionConfig` is no longer read by kube-apiserver)"
            } else {
                ""
            };
            let field = if file.kind != KIND {
                "kind"
            } else {
                "apiVersion"
            };
            return Err(fail(vec![at(
                field,
                format!(
                    "no kind {:?} is registered for version {:?}: want apiVersion {API_VERSION}, \
                     kind {KIND}{hint}",
                    file.kind, file.api_version
                ),
            )]));
        }
        let errors = validate(&file, &at);
        if !errors.is_empty() {
            return Err(fail(errors));
        }
        build(&file).map_err(|error| fail(vec![error(&at)]))
    }

    /// The transformer of a resource (`group` `""` for the core group).
    pub fn transformer(&self, group: &str, resource: &str) -> &Transformer {
        let lookups = [
            GroupResource::new(group, resource),
            GroupResource::new(group, "*"),
            GroupResource::new("*", "*"),
        ];
        lookups
            .iter()
            .find_map(|gr| self.by_resource.get(gr))
            .unwrap_or(&self.identity)
    }

    /// The resources the file names (as written: `secrets`, `*.apps`, `*.*`).
    pub fn resources(&self) -> impl Iterator<Item = &GroupResource> {
        self.by_resource.keys()
    }
}

type Locate<'a> = dyn Fn(&str, String) -> FieldError + 'a;

fn required(at: &Locate<'_>, field: &str, detail: String) -> FieldError {
    at(field, format!("Required value: {detail}"))
}

fn invalid(at: &Locate<'_>, field: &str, value: &str, detail: &str) -> FieldError {
    at(field, format!("Invalid value: {value}: {detail}"))
}

const MORE_THAN_ONE: &str = "more than one provider specified in a single element, should split into different list elements";
const NONE_OF_THEM: &str = "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity";
const EVENTS_GROUP: &str = "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file";
const EXTENSIONS_GROUP: &str =
    "'extensions' group has been removed and cannot be used for encryption";
const STAR_RESOURCE: &str =
    "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources";
const OVERLAP: &str = "using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked";
const NON_REST: &str = "resources which do not have REST API/s cannot be encrypted";
const CAPITALS: &str = "resource name should not contain capital letters";
const ACROSS_GROUPS: &str = "encrypting the same resource across groups is not supported";
const DUPLICATE: &str = "the same resource cannot be specified multiple times";

/// Upstream's `ValidateEncryptionConfiguration`, plus Tessera's refusal of `kms`.
fn validate(file: &File, at: &Locate<'_>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let rules = file.resources.as_deref().unwrap_or_default();
    if rules.is_empty() {
        errors.push(required(
            at,
            "resources",
            "at least one resources is required".into(),
        ));
        return errors;
    }
    for (i, rule) in rules.iter().enumerate() {
        let r = format!("resources[{i}].resources");
        let p = format!("resources[{i}].providers");
        let resources = rule.resources.as_deref().unwrap_or_default();
        if resources.is_empty() {
            errors.push(required(at, &r, format!("at least one {r} is required")));
        }
        errors.extend(validate_overlap(resources, &r, at));
        errors.extend(validate_names(resources, &r, at));
        let providers = rule.providers.as_deref().unwrap_or_default();
        if providers.is_empty() {
            errors.push(required(at, &p, format!("at least one {p} is required")));
        }
        for (j, provider) in providers.iter().enumerate() {
            let path = format!("{p}[{j}]");
            let kinds = [
                ("kms", provider.kms.is_some()),
                ("aesgcm", provider.aesgcm.is_some()),
                ("aescbc", provider.aescbc.is_some()),
                ("secretbox", provider.secretbox.is_some()),
                ("identity", provider.identity.is_some()),
            ];
            match kinds.iter().filter(|(_, set)| *set).count() {
                0 => {
                    errors.push(invalid(at, &path, "{}", NONE_OF_THEM));
                    continue;
                }
                1 => {}
                _ => {
                    errors.push(invalid(at, &path, "{...}", MORE_THAN_ONE));
                    continue;
                }
            }
            if provider.kms.is_some() {
                errors.push(at(
                    &format!("{path}.kms"),
                    "Unsupported value: kms: KMS providers are not supported by Tessera \
                     (supported: aesgcm, aescbc, secretbox, identity)"
                        .into(),
                ));
            }
            let keyed = [
                (
                    "aesgcm",
                    &provider.aesgcm,
                    &[16usize, 24, 32][..],
                    AES_KEY_SIZES,
                ),
                ("aescbc", &provider.aescbc, &[16, 24, 32][..], AES_KEY_SIZES),
                (
                    "secretbox",
                    &provider.secretbox,
                    &[32][..],
                    SECRETBOX_KEY_SIZES,
                ),
            ];
            for (name, config, sizes, sizes_text) in keyed {
                if let Some(config) = config {
                    let keys_path = format!("{path}.{name}.keys");
                    errors.extend(validate_keys(config, &keys_path, sizes, sizes_text, at));
                }
            }
        }
    }
    errors
}

fn validate_keys(
    config: &KeysConfiguration,
    path: &str,
    sizes: &[usize],
    sizes_text: &str,
    at: &Locate<'_>,
) -> Vec<FieldError> {
    let keys = config.keys.as_deref().unwrap_or_default();
    if keys.is_empty() {
        return vec![required(at, path, "at least one keys is required".into())];
    }
    let mut errors = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let key_path = format!("{path}[{i}]");
        if key.name.is_empty() {
            errors.push(required(
                at,
                &format!("{key_path}.name"),
                "name is a mandatory field for a key".into(),
            ));
        }
        let secret_path = format!("{key_path}.secret");
        if key.secret.is_empty() {
            errors.push(required(
                at,
                &secret_path,
                "secret is a mandatory field for a key".into(),
            ));
            continue;
        }
        match base64::engine::general_purpose::STANDARD.decode(&key.secret) {
            Err(_) => errors.push(invalid(
                at,
                &secret_path,
                "\"REDACTED\"",
                "secrets must be base64 encoded",
            )),
            Ok(secret) if !sizes.contains(&secret.len()) => errors.push(invalid(
                at,
                &secret_path,
                "\"REDACTED\"",
                &format!(
                    "secret is not of the expected length, got {}, expected one of {sizes_text}",
                    secret.len()
                ),
            )),
            Ok(_) => {}
        }
    }
    errors
}

fn quoted_list(resources: &[String]) -> String {
    let items: Vec<String> = resources.iter().map(|r| format!("{r:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

fn validate_overlap(resources: &[String], path: &str, at: &Locate<'_>) -> Vec<FieldError> {
    if resources.len() < 2 {
        return Vec::new();
    }
    let parsed: Vec<GroupResource> = resources.iter().map(|r| GroupResource::parse(r)).collect();
    let any = GroupResource::new("*", "*");
    let (mut overlap, mut duplicate) = (false, false);
    for (i, r1) in parsed.iter().enumerate() {
        for (j, r2) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if r1 == r2 && !duplicate {
                duplicate = true;
                continue;
            }
            if overlap {
                continue;
            }
            if *r1 == any {
                overlap = true;
                continue;
            }
            if r1.group != r2.group {
                continue;
            }
            if r1.resource == "*" || r2.resource == "*" {
                overlap = true;
            }
        }
    }
    let value = quoted_list(resources);
    let mut errors = Vec::new();
    if duplicate {
        errors.push(invalid(at, path, &value, DUPLICATE));
    }
    if overlap {
        errors.push(invalid(at, path, &value, OVERLAP));
    }
    errors
}

fn validate_names(resources: &[String], path: &str, at: &Locate<'_>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (j, resource) in resources.iter().enumerate() {
        let field = format!("{path}[{j}]");
        let value = format!("{resource:?}");
        let gr = GroupResource::parse(resource);
        let message = if resource.to_lowercase() != *resource {
            CAPITALS
        } else if resource == "*" {
            STAR_RESOURCE
        } else if matches!(
            resource.as_str(),
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            NON_REST
        } else if gr.group == "events.k8s.io" {
            EVENTS_GROUP
        } else if gr.group == "extensions" {
            EXTENSIONS_GROUP
        } else if gr.group == "*" && gr.resource != "*" {
            ACROSS_GROUPS
        } else {
            continue;
        };
        errors.push(invalid(at, &field, &value, message));
    }
    errors
}

/// A loader error after validation: its field and message.
type BuildError = Box<dyn Fn(&Locate<'_>) -> FieldError>;

/// Upstream's `getTransformerOverrides`: the masking checks, then each resource's providers.
fn build(file: &File) -> Result<EncryptionConfig, BuildError> {
    let mut by_resource: BTreeMap<GroupResource, Vec<Provider>> = BTreeMap::new();
    for (i, rule) in file.resources.iter().flatten().enumerate() {
        let providers = rule
            .providers
            .iter()
            .flatten()
            .filter_map(provider)
            .collect::<Vec<_>>();
        for (j, name) in rule.resources.iter().flatten().enumerate() {
            let gr = GroupResource::parse(name);
            let masks = [
                GroupResource::new(&gr.group, "*"),
                GroupResource::new("*", "*"),
            ];
            if let Some(mask) = masks.iter().find(|m| by_resource.contains_key(m)) {
                let (field, message) = (
                    format!("resources[{i}].resources[{j}]"),
                    format!(
                        "resource {:?} is masked by earlier rule {:?}",
                        gr.to_string(),
                        mask.to_string()
                    ),
                );
                return Err(Box::new(move |at: &Locate<'_>| at(&field, message.clone())));
            }
            by_resource
                .entry(gr)
                .or_default()
                .extend(providers.iter().cloned());
        }
    }
    Ok(EncryptionConfig {
        by_resource: by_resource
            .into_iter()
            .map(|(gr, providers)| (gr, Transformer { providers }))
            .collect(),
        identity: Transformer::identity(),
    })
}

/// A validated provider (kms never gets here).
fn provider(config: &ProviderConfiguration) -> Option<Provider> {
    type Make = fn(&[u8]) -> Result<Cipher, crate::transform::KeyLengthError>;
    let (prefix, keys, make, no_key): (_, _, Make, _) = if config.identity.is_some() {
        return Some(Provider::Identity);
    } else if let Some(c) = &config.aesgcm {
        (AESGCM_PREFIX, c, Cipher::aes_gcm, TransformError::NoAesKey)
    } else if let Some(c) = &config.aescbc {
        (AESCBC_PREFIX, c, Cipher::aes_cbc, TransformError::NoAesKey)
    } else if let Some(c) = &config.secretbox {
        (
            SECRETBOX_PREFIX,
            c,
            Cipher::secretbox,
            TransformError::NoSecretboxKey,
        )
    } else {
        return None;
    };
    let keys = keys
        .keys
        .iter()
        .flatten()
        .filter_map(|key| {
            let secret = base64::engine::general_purpose::STANDARD
                .decode(&key.secret)
                .ok()?;
            Some(Key {
                prefix: format!("{}:", key.name),
                cipher: make(&secret).ok()?,
            })
        })
        .collect();
    Some(Provider::Keyed {
        prefix,
        keys,
        no_key,
    })
}
