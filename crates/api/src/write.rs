//! The semantics of writes, decided over the objects involved: what a request body must be
//! (apiVersion, kind, schema, unknown fields), the metadata the server sets on create, how an
//! update is merged with the stored object (server-owned metadata, status, generation), how
//! a patch of each flavour applies, what a delete does (preconditions, finalizers, pod grace,
//! namespace cleanup), and the stored encoding of an object.
//!
//! Knows nothing about the store's transactions, the clock or the host's randomness: the
//! shell reads the stored object, passes the time and a seeded [`Ids`], and commits what is
//! decided here.

use std::time::{Duration, SystemTime};
use tessera_model::json::Pointer as _;

use bytes::Bytes;
use serde_json::{Value, json};
use tessera_model::ids::Ids;

use crate::convert;
use crate::crd_status::{self, ClaimedNames};
use crate::error::{ApiError, ApiResult, Cause};
use crate::meta::{self, finalizers, is_deleting, meta_str, metadata_mut};
use crate::patch::{self, PatchError};
use crate::resource::Resource;
use crate::ssa;
use crate::strategy;
use crate::validation;

/// What to do with unknown fields in a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Fail the request.
    Strict,
    /// Drop them and warn (the default).
    #[default]
    Warn,
    /// Drop them silently.
    Ignore,
}

/// Options every write takes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Validate and compute the result, but persist nothing.
    pub dry_run: bool,
    /// Unknown-field handling.
    pub field_validation: FieldValidation,
    /// The manager the write's changed fields are recorded for in `managedFields`.
    pub field_manager: Option<String>,
    /// The subresource the write came through (`status`, `scale`), recorded with its
    /// `managedFields` entry.
    pub subresource: Option<&'static str>,
    /// The requesting user's name, for admission that exempts users (Pod Security); `None`
    /// for the server's own writes.
    pub user: Option<String>,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The object (its status is kept, for kinds with a status subresource).
    Main,
    /// Only `.status`.
    Status,
}

/// A patch body and its flavour.
#[derive(Debug, Clone)]
pub enum PatchBody {
    /// RFC 6902 JSON Patch (raw bytes).
    Json(Bytes),
    /// RFC 7386 merge patch.
    Merge(Value),
    /// Strategic merge patch.
    Strategic(Value),
    /// Server-side apply of a configuration by a manager.
    Apply {
        /// The applied configuration.
        config: Value,
        /// The manager applying it.
        manager: String,
        /// Whether to take over fields other managers own.
        force: bool,
    },
}

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Delete the owner now; the garbage collector deletes dependents afterwards.
    Background,
    /// Delete dependents first, then the owner.
    Foreground,
    /// Keep dependents, removing their owner references.
    Orphan,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Seconds of grace before a pod is removed; 0 removes at once.
    pub grace_period_seconds: Option<i64>,
    /// Dependent handling; `None` means background.
    pub propagation: Option<Propagation>,
    /// Only delete if the UID matches.
    pub precondition_uid: Option<String>,
    /// Only delete if the resourceVersion matches.
    pub precondition_resource_version: Option<String>,
}

/// The result of a write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object as stored (or as it would be, for dry runs).
    pub object: Value,
    /// Warnings for the client (`Warning` headers).
    pub warnings: Vec<String>,
    /// Whether the write created the object.
    pub created: bool,
    /// The object's JSON exactly as stored, when the stored form is also the served one:
    /// an answer sends these bytes instead of encoding `object` again. `None` for dry runs,
    /// deletions and kinds stored in another version.
    pub encoded: Option<Bytes>,
    /// Audit annotations admission set on the request (`pod-security.kubernetes.io/…`), for
    /// the audit log's event of this write.
    pub audit_annotations: Vec<(String, String)>,
}

/// The result of a delete.
#[derive(Debug, Clone)]
pub struct Deleted {
    /// The object's final form, or its terminating form if it is not gone yet.
    pub object: Value,
    /// Whether the object is gone (false: finalizers or grace are pending).
    pub gone: bool,
}

/// Finalizer that makes the garbage collector delete dependents before the owner.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer that makes the garbage collector orphan dependents before the owner goes.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// An object in its stored encoding, with the place the store writes its revision into.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// The JSON bytes, `metadata.resourceVersion` left empty.
    pub bytes: Vec<u8>,
    /// Where the revision goes: just after `"resourceVersion":"`, if the object has metadata.
    pub revision_at: Option<usize>,
}

/// Encodes an object in its stored form, leaving the place of `metadata.resourceVersion` for
/// the store to write the change's revision in (it is known only once the change is queued).
/// `resourceVersion` comes first in `metadata`; everything else keeps its order.
pub fn encode_versioned(resource: Resource, object: &Value) -> Encoded {
    let converted;
    let stored = if convert::stored_as_served(resource) {
        object
    } else {
        converted = convert::to_storage(resource, object.clone());
        &converted
    };
    let mut out = Vec::with_capacity(1024);
    let mut revision_at = None;
    match stored {
        Value::Object(fields) => {
            out.push(b'{');
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(&mut out, key);
                out.push(b':');
                match (key.as_str(), value) {
                    ("metadata", Value::Object(metadata)) => {
                        revision_at = Some(open_revision_slot(&mut out));
                        for (key, value) in metadata.iter().filter(|(k, _)| *k != "resourceVersion")
                        {
                            out.push(b',');
                            write_json(&mut out, key);
                            out.push(b':');
                            write_json(&mut out, value);
                        }
                        out.push(b'}');
                    }
                    _ => write_json(&mut out, value),
                }
            }
            out.push(b'}');
        }
        other => write_json(&mut out, other),
    }
    Encoded {
        bytes: out,
        revision_at,
    }
}

/// Opens the stored form's metadata with its revision slot, `{"resourceVersion":""`, and
/// gives where the store writes the revision's digits (between the quotes).
pub(crate) fn open_revision_slot(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(br#"{"resourceVersion":""#);
    let at = out.len();
    out.push(b'"');
    at
}

/// Appends JSON; writing strings and `Value`s to memory cannot fail.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    if let Err(error) = serde_json::to_writer(out, value) {
        tracing::error!(%error, "cannot encode an object");
    }
}

/// Sets `metadata.resourceVersion` to a committed revision.
pub fn set_resource_version(object: &mut Value, revision: u64) {
    metadata_mut(object).insert("resourceVersion".into(), json!(revision.to_string()));
}

/// Checks a request body: apiVersion and kind, schema, metadata and kind rules.
/// Returns warnings for unknown fields (which are removed) or fails.
pub fn admit(
    resource: Resource,
    object: &mut Value,
    options: &WriteOptions,
) -> ApiResult<Vec<String>> {
    admit_as(resource, object, options, Body::New)
}

/// Whether a body admitted is a new object or the requested next version of a stored one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    New,
    /// A custom resource's CEL rules and validating admission then run once, in
    /// [`next_version`], against the stored object (transition rules included).
    Next,
}

fn admit_as(
    resource: Resource,
    object: &mut Value,
    options: &WriteOptions,
    body: Body,
) -> ApiResult<Vec<String>> {
    admit_walking(resource, object, options, body, Walked::Whole)
}

/// What of an object its schema validation walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walked {
    /// All of it.
    Whole,
    /// A custom object's status write: its status, and its metadata when the body names it
    /// ([`validation::validate_custom_status`]).
    Status { with_metadata: bool },
}

/// Whether a status write's merge patch names nothing but the object's `status`, `metadata`,
/// `apiVersion` and `kind` (then only those are validated): `Some(names metadata)`, or
/// `None` when it names anything else (validated whole, so that what it names is reported as
/// upstream's decoding reports it).
fn status_write_members(patch: &Value) -> Option<bool> {
    let members = patch.as_object()?;
    members
        .keys()
        .all(|key| matches!(key.as_str(), "status" | "metadata" | "apiVersion" | "kind"))
        .then(|| members.contains_key("metadata"))
}

fn admit_walking(
    resource: Resource,
    object: &mut Value,
    options: &WriteOptions,
    body: Body,
    walked: Walked,
) -> ApiResult<Vec<String>> {
    let Some(map) = object.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let api_version = resource.info.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None => {
            map.insert("apiVersion".into(), json!(api_version));
        }
        Some(given) if given == api_version => {}
        Some(given) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({given}) does not match the expected API version ({api_version})"
            )));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None => {
            map.insert("kind".into(), json!(resource.kind()));
        }
        Some(given) if given == resource.kind() => {}
        Some(given) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({given}) does not match the expected kind ({})",
                resource.kind()
            )));
        }
    }
    let findings = match walked {
        Walked::Whole => validation::validate_resource(resource, object),
        Walked::Status { with_metadata } => {
            validation::validate_custom_status(resource, object, with_metadata)
        }
    };
    let mut warnings = Vec::new();
    if !findings.unknown_fields.is_empty() {
        match options.field_validation {
            FieldValidation::Strict => {
                let listed = findings
                    .unknown_fields
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {listed}"
                )));
            }
            FieldValidation::Warn => warnings.extend(
                findings
                    .unknown_fields
                    .iter()
                    .map(|f| format!("unknown field \"{f}\"")),
            ),
            FieldValidation::Ignore => {}
        }
    }
    let mut causes = findings.causes;
    causes.extend(meta::check_metadata(resource, object));
    if resource.is_custom() && body == Body::Next {
        // Its rules and validating admission run in `next_version`, with the stored object.
    } else if resource.is_custom() {
        // As upstream orders them: the schema, its CEL rules, then validating admission
        // (Kueue's webhooks, `validation::kueue`).
        if causes.is_empty() {
            causes.extend(crate::rules::check(resource.schema(), object, None));
        }
        if causes.is_empty() {
            causes.extend(strategy::validate(resource, object));
        }
    } else {
        causes.extend(strategy::validate(resource, object));
    }
    if !causes.is_empty() {
        let name = meta_str(object, "name").unwrap_or_default().to_string();
        return Err(ApiError::invalid(
            resource.group(),
            resource.kind(),
            &name,
            causes,
        ));
    }
    Ok(warnings)
}

/// What [`begin_create`] decided about a new object's name, and the warnings of its body.
#[derive(Debug, Clone)]
pub struct Creation {
    /// Warnings for the client.
    pub warnings: Vec<String>,
    /// Whether the name was generated (a collision is then retried with a new suffix).
    pub generated: bool,
    /// The `generateName` prefix, if any.
    pub prefix: Option<String>,
}

/// The first checks of a create, before anything is read: the body's namespace agrees with
/// the request's, a name is given or generated, the custom resource is not terminating,
/// status is reset (it is the server's to set) and the body is admitted.
pub fn begin_create(
    resource: Resource,
    namespace: Option<&str>,
    object: &mut Value,
    options: &WriteOptions,
    ids: &Ids,
) -> ApiResult<Creation> {
    if let Some(given) = object
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        && resource.namespaced()
        && Some(given) != namespace
        && !given.is_empty()
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let generated = meta_str(object, "name").is_none_or(str::is_empty);
    let prefix = meta_str(object, "generateName").map(str::to_string);
    if generated {
        match &prefix {
            Some(prefix) if !prefix.is_empty() => regenerate_name(object, prefix, ids),
            _ => {
                return Err(ApiError::invalid(
                    resource.group(),
                    resource.kind(),
                    "",
                    vec![Cause {
                        reason: "FieldValueRequired",
                        field: "metadata.name".into(),
                        message: "Required value: name or generateName is required".into(),
                    }],
                ));
            }
        }
    }
    if resource.info.custom.as_ref().is_some_and(|c| c.terminating) {
        return Err(ApiError::method_not_allowed(&format!(
            "create not allowed while custom resource definition {} is terminating",
            resource.info.custom.as_ref().map_or("", |c| c.crd.as_str())
        )));
    }
    // Status is the server's to set: it is reset before validation, as upstream does.
    strategy::reset_status(resource, object);
    let warnings = admit(resource, object, options)?;
    Ok(Creation {
        warnings,
        generated,
        prefix,
    })
}

/// Refuses new content in a namespace that is being terminated.
pub fn check_namespace_open(
    resource: Resource,
    namespace: &str,
    terminating: bool,
) -> ApiResult<()> {
    if terminating {
        return Err(ApiError::forbidden(
            resource.group(),
            resource.plural(),
            "",
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        ));
    }
    Ok(())
}

/// The few metadata fields the write path reads of a stored object without building it: the
/// rest of the JSON is skipped unparsed.
#[derive(serde::Deserialize, Default)]
struct StoredMetadata {
    #[serde(default)]
    name: Value,
    #[serde(default)]
    labels: Value,
    #[serde(rename = "deletionTimestamp", default)]
    deletion_timestamp: Value,
}

fn stored_metadata(stored: &[u8]) -> Result<StoredMetadata, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Stored {
        #[serde(default)]
        metadata: Option<StoredMetadata>,
    }
    let stored: Stored = serde_json::from_slice(stored)?;
    Ok(stored.metadata.unwrap_or_default())
}

/// What a create reads of its stored namespace, read without building the object (every
/// create in a namespace asks it): whether the namespace is terminating, and the namespace as
/// policy admission reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceFacts {
    /// Whether it has a `metadata.deletionTimestamp` ([`is_deleting`]).
    pub terminating: bool,
    /// `{"metadata": {"name", "labels"}}`, the rest skipped unparsed: Pod Security reads the
    /// namespace of every pod create, and the whole object (managed fields and all) cost
    /// more to decode than the check itself.
    pub policy_view: Value,
}

/// The [`NamespaceFacts`] of a stored namespace's JSON.
pub fn namespace_facts(stored: &[u8]) -> Result<NamespaceFacts, serde_json::Error> {
    let stored = stored_metadata(stored)?;
    let terminating = stored.deletion_timestamp.is_string();
    let mut metadata = serde_json::Map::new();
    for (field, value) in [("name", stored.name), ("labels", stored.labels)] {
        if !value.is_null() {
            metadata.insert(field.to_string(), value);
        }
    }
    Ok(NamespaceFacts {
        terminating,
        policy_view: serde_json::json!({ "metadata": metadata }),
    })
}

/// The server-set metadata of a new object (UID from `ids`, creation time `now`, generation 1,
/// namespace), the kind's create strategy, a CRD's initial status (given the names other CRDs
/// of its group hold), normalized metadata and the manager's `managedFields` entry.
pub fn stamp_create(
    resource: Resource,
    namespace: Option<&str>,
    object: &mut Value,
    options: &WriteOptions,
    now: SystemTime,
    ids: &Ids,
    claims: Option<&ClaimedNames>,
) {
    let now = meta::timestamp(now);
    {
        let metadata = metadata_mut(object);
        for server_set in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ] {
            metadata.remove(server_set);
        }
        if let Some(namespace) = namespace {
            metadata.insert("namespace".into(), json!(namespace));
        } else {
            metadata.remove("namespace");
        }
        metadata.insert("uid".into(), json!(ids.uid()));
        metadata.insert("creationTimestamp".into(), json!(now));
        metadata.insert("generation".into(), json!(1));
    }
    strategy::prepare_for_create(resource, object);
    if let Some(claims) = claims {
        object["status"] = crd_status::status(object, &now, claims);
    }
    meta::normalize_metadata(object);
    if let Some(manager) = &options.field_manager {
        ssa::record_update(
            &json!({}),
            object,
            manager,
            &resource.info.api_version(),
            &now,
            options.subresource,
            resource.schema(),
        );
    }
}

/// Gives a new object another generated name after a collision.
pub fn regenerate_name(object: &mut Value, prefix: &str, ids: &Ids) {
    metadata_mut(object).insert("name".into(), json!(meta::generate_name(prefix, ids)));
}

/// The checks of a replacement (PUT) body: it is admitted and names the object of the URL.
/// Returns its warnings and the `resourceVersion` it requires of the stored object.
pub fn begin_update(
    resource: Resource,
    name: &str,
    object: &mut Value,
    options: &WriteOptions,
) -> ApiResult<(Vec<String>, Option<String>)> {
    let warnings = admit_as(resource, object, options, Body::Next)?;
    if meta_str(object, "name").is_some_and(|given| given != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta_str(object, "name").unwrap_or_default()
        )));
    }
    let precondition = meta_str(object, "resourceVersion").map(str::to_string);
    Ok((warnings, precondition))
}

/// Whether the stored object still has the `resourceVersion` a write requires.
pub fn check_precondition(
    resource: Resource,
    name: &str,
    current: &Value,
    precondition: Option<&str>,
) -> ApiResult<()> {
    if let Some(wanted) = precondition
        && meta_str(current, "resourceVersion") != Some(wanted)
    {
        return Err(ApiError::modified(
            resource.group(),
            resource.plural(),
            name,
        ));
    }
    Ok(())
}

/// Applies a patch to the stored object and admits the result; returns the requested object
/// and the body's warnings. A `resourceVersion` in the patch is a precondition.
pub fn apply_patch(
    resource: Resource,
    name: &str,
    current: &Value,
    body: &PatchBody,
    options: &WriteOptions,
    now: SystemTime,
) -> ApiResult<(Value, Vec<String>)> {
    let schema = resource.schema();
    let patched = match body {
        PatchBody::Json(bytes) => patch::json_patch(current, bytes),
        PatchBody::Merge(value) => patch::merge_patch(current, value),
        PatchBody::Strategic(_) if resource.is_custom() => {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json (strategic merge patch is not supported for custom resources)",
            ));
        }
        PatchBody::Strategic(value) => patch::strategic_merge(current, value, schema),
        PatchBody::Apply {
            config,
            manager,
            force,
        } => {
            let now = meta::timestamp(now);
            let api_version = resource.info.api_version();
            match ssa::apply(current, config, manager, &api_version, &now, *force, schema) {
                Ok(applied) => Ok(applied.object),
                Err(conflicts) => return Err(apply_conflict(resource, name, &conflicts)),
            }
        }
    }
    .map_err(|error| match error {
        PatchError::Malformed(message) => ApiError::bad_request(message),
        PatchError::DoesNotApply(message) => {
            let mut error = ApiError::invalid(resource.group(), resource.kind(), name, vec![]);
            error.message = message;
            error
        }
    })?;
    let mut patched = patched;
    // A resourceVersion in the patch is a precondition.
    let given = meta_str(&patched, "resourceVersion").map(str::to_string);
    if given.is_some() && given.as_deref() != meta_str(current, "resourceVersion") {
        return Err(ApiError::modified(
            resource.group(),
            resource.plural(),
            name,
        ));
    }
    let walked = match body {
        PatchBody::Merge(patch)
            if resource.is_custom() && options.subresource == Some("status") =>
        {
            status_write_members(patch).map_or(Walked::Whole, |with_metadata| Walked::Status {
                with_metadata,
            })
        }
        _ => Walked::Whole,
    };
    let warnings = admit_walking(resource, &mut patched, options, Body::Next, walked)?;
    Ok((patched, warnings))
}

/// The object an update stores, from the stored one and the requested one: merged as the
/// part addressed demands, a CRD's status recomputed, metadata normalized, the manager's
/// fields recorded, and validated against the stored object (transition rules included).
#[allow(clippy::too_many_arguments)]
pub fn next_version(
    resource: Resource,
    name: &str,
    current: &Value,
    requested: Value,
    part: Part,
    options: &WriteOptions,
    now: SystemTime,
    claims: Option<&ClaimedNames>,
) -> ApiResult<Value> {
    let mut next = merge_update(resource, current, requested, part);
    if let Some(claims) = claims {
        next["status"] = crd_status::status(&next, &meta::timestamp(now), claims);
    }
    meta::normalize_metadata(&mut next);
    if let Some(manager) = &options.field_manager {
        let now = meta::timestamp(now);
        ssa::record_update(
            current,
            &mut next,
            manager,
            &resource.info.api_version(),
            &now,
            options.subresource,
            resource.schema(),
        );
    }
    let mut causes = Vec::new();
    if resource.is_custom() {
        // Transition rules see the stored object as oldSelf; validating admission (Kueue's
        // webhooks) runs once the rules pass.
        causes.extend(crate::rules::check(resource.schema(), &next, Some(current)));
        if causes.is_empty() {
            causes.extend(strategy::validate_update(resource, current, &next));
        }
    } else {
        causes.extend(strategy::validate_update(resource, current, &next));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            resource.group(),
            resource.kind(),
            name,
            causes,
        ));
    }
    Ok(next)
}

/// What a delete does to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// The object goes now.
    Remove,
    /// The object stays, terminating (finalizers, grace or namespace cleanup pending); it
    /// was updated in place.
    Terminate,
}

/// Decides a delete of the stored `object` (updated in place when it stays, terminating):
/// preconditions, propagation finalizers, a pod's grace period (`node_exists` tells whether
/// the node it is bound to exists) and a namespace's content cleanup.
pub fn decide_delete(
    resource: Resource,
    name: &str,
    object: &mut Value,
    options: &DeleteOptions,
    node_exists: &dyn Fn(&str) -> bool,
    now: SystemTime,
) -> ApiResult<Deletion> {
    if let Some(uid) = &options.precondition_uid
        && meta_str(object, "uid") != Some(uid.as_str())
    {
        return Err(ApiError::conflict(
            resource.group(),
            resource.plural(),
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(object, "uid").unwrap_or_default()
            ),
        ));
    }
    if let Some(version) = &options.precondition_resource_version
        && meta_str(object, "resourceVersion") != Some(version.as_str())
    {
        return Err(ApiError::conflict(
            resource.group(),
            resource.plural(),
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {version}, ResourceVersion in object meta: {}",
                meta_str(object, "resourceVersion").unwrap_or_default()
            ),
        ));
    }
    let mut finalizer_list = finalizers(object);
    let add_finalizer = match options.propagation {
        Some(Propagation::Foreground) => Some(FOREGROUND_FINALIZER),
        Some(Propagation::Orphan) => Some(ORPHAN_FINALIZER),
        _ => None,
    };
    if let Some(finalizer) = add_finalizer
        && !finalizer_list.iter().any(|f| f == finalizer)
        && !is_deleting(object)
    {
        finalizer_list.push(finalizer.to_string());
    }
    let grace = pod_grace_seconds(resource, object, options, node_exists);
    let needs_namespace_cleanup =
        is_namespace(resource) && !namespace_finalizers(object).is_empty();
    let keep = !finalizer_list.is_empty() || grace > 0 || needs_namespace_cleanup;
    if !keep {
        return Ok(Deletion::Remove);
    }
    let already = is_deleting(object);
    let metadata = metadata_mut(object);
    if !finalizer_list.is_empty() {
        metadata.insert("finalizers".into(), json!(finalizer_list));
    }
    if !already {
        let at = now + Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        metadata.insert("deletionTimestamp".into(), json!(meta::timestamp(at)));
        metadata.insert("deletionGracePeriodSeconds".into(), json!(grace));
        let generation = metadata
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        metadata.insert("generation".into(), json!(generation + 1));
    } else if grace == 0 && resource.kind() == "Pod" && finalizer_list.is_empty() {
        // A second delete with no grace finishes a terminating pod.
        return Ok(Deletion::Remove);
    } else {
        metadata.insert("deletionGracePeriodSeconds".into(), json!(grace));
    }
    if needs_namespace_cleanup {
        object["status"]["phase"] = json!("Terminating");
    }
    Ok(Deletion::Terminate)
}

/// A pod's grace period: its node twin must confirm termination unless the pod never ran,
/// already finished, is bound to a node that does not exist, or the grace period is zero.
pub fn pod_grace_seconds(
    resource: Resource,
    pod: &Value,
    options: &DeleteOptions,
    node_exists: &dyn Fn(&str) -> bool,
) -> i64 {
    if (resource.group(), resource.kind()) != ("", "Pod") {
        return 0;
    }
    let node = pod.at("/spec/nodeName").and_then(Value::as_str);
    let phase = pod.at("/status/phase").and_then(Value::as_str);
    let runs = node.is_some_and(node_exists) && !matches!(phase, Some("Succeeded" | "Failed"));
    if !runs {
        return 0;
    }
    options
        .grace_period_seconds
        .or_else(|| {
            pod.at("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}

pub fn is_namespace(resource: Resource) -> bool {
    (resource.group(), resource.kind()) == ("", "Namespace")
}

/// A namespace's `spec.finalizers` (the namespace controller's `kubernetes`).
pub fn namespace_finalizers(namespace: &Value) -> Vec<String> {
    tessera_model::json::strings_at(namespace, "/spec/finalizers")
}

/// Whether something still holds a terminating object: finalizers, a namespace's content
/// finalizer, or a pod's kubelet (a pod on a node with grace left).
pub fn holds_deletion(resource: Resource, object: &Value) -> bool {
    let kubelet = (resource.group(), resource.kind()) == ("", "Pod")
        && object
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|grace| grace > 0);
    let namespace = is_namespace(resource) && !namespace_finalizers(object).is_empty();
    !finalizers(object).is_empty() || kubelet || namespace
}

/// Combines the stored object with a requested one: server-owned metadata is kept, status or
/// the rest is kept depending on the part addressed, and generation follows spec changes.
pub fn merge_update(resource: Resource, current: &Value, requested: Value, part: Part) -> Value {
    let mut next = match part {
        Part::Status => {
            // The stored object with the requested status in its place: the stored status is
            // not copied, the requested one is moved.
            let mut requested = requested;
            let mut status = requested.as_object_mut().and_then(|r| r.remove("status"));
            match current.as_object() {
                Some(fields) => {
                    let mut next = serde_json::Map::with_capacity(fields.len() + 1);
                    for (field, value) in fields {
                        if field != "status" {
                            next.insert(field.clone(), value.clone());
                        } else if let Some(status) = status.take() {
                            next.insert(field.clone(), status);
                        }
                    }
                    if let Some(status) = status {
                        next.insert("status".to_owned(), status);
                    }
                    Value::Object(next)
                }
                None => current.clone(),
            }
        }
        Part::Main => {
            let mut next = requested;
            if (resource.group(), resource.kind()) == ("", "Namespace") {
                crate::strategy::label_namespace_name(&mut next);
            }
            if resource.has_status() {
                match current.get("status") {
                    Some(status) => next["status"] = status.clone(),
                    None => {
                        if let Some(map) = next.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
            }
            next
        }
    };
    let kept = [
        "uid",
        "creationTimestamp",
        "name",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ];
    {
        let current_meta = current.get("metadata").and_then(Value::as_object);
        let metadata = metadata_mut(&mut next);
        for field in kept {
            match current_meta.and_then(|m| m.get(field)) {
                Some(value) => {
                    metadata.insert(field.into(), value.clone());
                }
                None => {
                    metadata.remove(field);
                }
            }
        }
    }
    // Everything but metadata, status and the type: a change there is a new generation.
    fn spec_of(object: &Value) -> impl Iterator<Item = (&String, &Value)> {
        object
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind"))
    }
    if !spec_of(current).eq(spec_of(&next)) {
        let generation = current
            .at("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        metadata_mut(&mut next).insert("generation".into(), json!(generation + 1));
    }
    next
}

/// The 409 an apply answers when it would change fields other managers own.
pub fn apply_conflict(resource: Resource, name: &str, conflicts: &[ssa::Conflict]) -> ApiError {
    let mut error = ApiError::conflict(resource.group(), resource.plural(), name, "");
    error.message = ssa::conflict_message(conflicts);
    if let Some(details) = error.details.as_mut() {
        details.causes = conflicts
            .iter()
            .map(|c| Cause {
                reason: "FieldManagerConflict",
                field: c.field.clone(),
                message: format!("conflict with {}", c.manager),
            })
            .collect();
    }
    error
}

pub fn is_crd(resource: Resource) -> bool {
    (resource.group(), resource.kind()) == ("apiextensions.k8s.io", "CustomResourceDefinition")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_carry_their_name_label_whatever_the_client_sends() {
        let namespaces = Resource::find("", "v1", "namespaces").expect("namespaces are served");
        let name_label = |object: &Value| {
            object
                .at("/metadata/labels/kubernetes.io~1metadata.name")
                .cloned()
        };
        let table = [
            ("no labels", json!({"metadata": {"name": "team-a"}})),
            (
                "a wrong value",
                json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "x", "tier": "gpu"}}}),
            ),
        ];
        for (case, requested) in table {
            let mut created = requested.clone();
            crate::strategy::prepare_for_create(namespaces, &mut created);
            assert_eq!(
                name_label(&created),
                Some(json!("team-a")),
                "create, {case}"
            );
            let updated = merge_update(namespaces, &created, requested, Part::Main);
            assert_eq!(
                name_label(&updated),
                Some(json!("team-a")),
                "update, {case}"
            );
        }
    }

    #[test]
    fn a_custom_status_patch_is_refused_and_warned_about_as_a_whole_object_walk_would() {
        let workloads = tessera_model::kueue::crd::definitions()
            .iter()
            .flat_map(crate::crd::kinds_of)
            .find(|kind| kind.plural == "workloads" && kind.version == "v1beta2")
            .map(|kind| Resource {
                info: Box::leak(Box::new(kind)),
            })
            .expect("Kueue's Workloads are bundled");
        let stored = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team", "resourceVersion": "7"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1,
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]}});
        // (case, patch, field validation, a refusal naming, warnings naming)
        let cases = [
            (
                "a valid status",
                json!({"status": {"clusterName": "w1"}}),
                FieldValidation::Strict,
                None,
                vec![],
            ),
            (
                "an unknown status field, strict",
                json!({"status": {"bogus": 1}}),
                FieldValidation::Strict,
                Some("status.bogus"),
                vec![],
            ),
            (
                "an unknown status field, warned",
                json!({"status": {"bogus": 1}}),
                FieldValidation::Warn,
                None,
                vec!["status.bogus"],
            ),
            (
                "a wrong type in status",
                json!({"status": {"clusterName": 5}}),
                FieldValidation::Strict,
                Some("status.clusterName"),
                vec![],
            ),
            (
                "an unknown metadata field",
                json!({"metadata": {"bogus": 1}, "status": {}}),
                FieldValidation::Strict,
                Some("metadata.bogus"),
                vec![],
            ),
            (
                "a precondition and a status",
                json!({"metadata": {"resourceVersion": "7"}, "status": {"clusterName": "w1"}}),
                FieldValidation::Strict,
                None,
                vec![],
            ),
            (
                "an unknown spec field: the object walked whole",
                json!({"spec": {"bogus": 1}, "status": {}}),
                FieldValidation::Strict,
                Some("spec.bogus"),
                vec![],
            ),
        ];
        for (case, patch, field_validation, refused, warned) in cases {
            let options = WriteOptions {
                subresource: Some("status"),
                field_validation,
                ..WriteOptions::default()
            };
            let body = PatchBody::Merge(patch.clone());
            let answer = apply_patch(
                workloads,
                "w",
                &stored,
                &body,
                &options,
                SystemTime::UNIX_EPOCH,
            );
            let mut whole =
                crate::patch::merge_patch(&stored, &patch).expect("a merge patch applies");
            let walked_whole = admit_as(workloads, &mut whole, &options, Body::Next);
            match (&answer, refused) {
                (Ok((_, warnings)), None) => {
                    assert_eq!(warnings.len(), warned.len(), "{case}: {warnings:?}");
                    for (warning, field) in warnings.iter().zip(&warned) {
                        assert!(warning.contains(field), "{case}: {warning}");
                    }
                    let whole_warnings = walked_whole.expect("admitted whole too");
                    assert_eq!(warnings, &whole_warnings, "{case}: as walked whole");
                }
                (Err(error), Some(field)) => {
                    assert!(error.message.contains(field), "{case}: {}", error.message);
                    let whole_error = walked_whole.expect_err("refused whole too");
                    assert_eq!(
                        error.message, whole_error.message,
                        "{case}: as walked whole"
                    );
                }
                (answer, _) => panic!("{case}: {answer:?}"),
            }
        }
    }

    #[test]
    fn a_status_write_keeps_the_stored_object_but_its_status() {
        let deployments =
            Resource::find("apps", "v1", "deployments").expect("deployments are served");
        let stored = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "w", "resourceVersion": "7"},
            "spec": {"replicas": 1}, "status": {"conditions": [{"type": "Old"}]}});
        // (requested, the status stored after, in which place among the fields)
        let cases = [
            (
                json!({"spec": {"replicas": 5}, "status": {"conditions": []}}),
                Some(json!({"conditions": []})),
            ),
            (json!({"status": null}), Some(Value::Null)),
            (json!({"spec": {}}), None),
        ];
        for (requested, status) in cases {
            let next = merge_update(deployments, &stored, requested.clone(), Part::Status);
            assert_eq!(
                next["spec"], stored["spec"],
                "{requested}: the spec is kept"
            );
            assert_eq!(next.get("status"), status.as_ref(), "{requested}");
            let fields: Vec<&String> = next.as_object().expect("an object").keys().collect();
            let mut want = vec!["apiVersion", "kind", "metadata", "spec"];
            want.extend(status.as_ref().map(|_| "status"));
            assert_eq!(fields, want, "{requested}: the fields in their order");
        }
        // A status added to an object without one comes last.
        let bare = json!({"metadata": {"name": "w"}, "spec": {}});
        let next = merge_update(
            deployments,
            &bare,
            json!({"status": {"a": 1}}),
            Part::Status,
        );
        let fields: Vec<&String> = next.as_object().expect("an object").keys().collect();
        assert_eq!(fields, ["metadata", "spec", "status"]);
    }

    #[test]
    fn stored_deletion_is_read_as_is_deleting_reads_it() {
        let cases = [
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            json!({"metadata": {"deletionTimestamp": null}}),
            json!({"metadata": {"deletionTimestamp": 5}}),
            json!({"metadata": null}),
            json!({"kind": "Namespace"}),
            json!({"spec": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        ];
        for object in cases {
            let bytes = serde_json::to_vec(&object).expect("JSON encodes");
            assert_eq!(
                namespace_facts(&bytes)
                    .expect("stored JSON parses")
                    .terminating,
                is_deleting(&object),
                "{object}"
            );
        }
        assert!(namespace_facts(b"{not json").is_err());
    }

    #[test]
    fn a_stored_namespace_is_read_for_its_name_and_labels_only() {
        let labels = json!({"pod-security.kubernetes.io/enforce": "restricted", "team": "a"});
        // (stored namespace, what policy admission is handed)
        let cases = [
            (
                json!({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "ml", "uid": "u", "labels": labels,
                                    "managedFields": [{"manager": "kubectl"}]},
                       "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
                json!({"metadata": {"name": "ml", "labels": labels}}),
            ),
            (
                json!({"metadata": {"name": "plain"}}),
                json!({"metadata": {"name": "plain"}}),
            ),
            (json!({"metadata": null}), json!({"metadata": {}})),
            (json!({"kind": "Namespace"}), json!({"metadata": {}})),
        ];
        for (stored, expected) in cases {
            let bytes = serde_json::to_vec(&stored).expect("JSON encodes");
            assert_eq!(
                namespace_facts(&bytes)
                    .expect("stored JSON parses")
                    .policy_view,
                expected,
                "{stored}"
            );
        }
    }

    #[test]
    fn generated_names_and_uids_come_from_the_seeded_ids() {
        let configmaps = Resource::find("", "v1", "configmaps").expect("configmaps are served");
        let mut object = json!({"metadata": {"generateName": "web-"}, "data": {"a": "b"}});
        let ids = Ids::seeded(7);
        let creation = begin_create(
            configmaps,
            Some("default"),
            &mut object,
            &WriteOptions::default(),
            &ids,
        )
        .expect("a valid ConfigMap");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        stamp_create(
            configmaps,
            Some("default"),
            &mut object,
            &WriteOptions::default(),
            now,
            &ids,
            None,
        );
        let expected = Ids::seeded(7);
        let suffix = expected.name_suffix();
        assert!(creation.generated);
        assert_eq!(
            meta_str(&object, "name"),
            Some(format!("web-{suffix}").as_str())
        );
        assert_eq!(meta_str(&object, "uid"), Some(expected.uid().as_str()));
        assert_eq!(meta_str(&object, "namespace"), Some("default"));
        assert_eq!(
            meta_str(&object, "creationTimestamp"),
            Some(meta::timestamp(now).as_str())
        );
        assert_eq!(object.at("/metadata/generation"), Some(&json!(1)));
    }
}
