//! Kubernetes object semantics over the revisioned store: create, read, update, patch and
//! delete with server-set metadata, optimistic concurrency, generation, finalizers, graceful
//! pod deletion, namespace lifecycle, dry runs and field validation.
//!
//! Every write is one read-modify-write transaction of the store, so patches and
//! preconditions are evaluated against the exact stored object. Knows nothing about HTTP:
//! the REST handlers, the garbage collector and the namespace controller all call this.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde_json::{Value, json};
use tessera_store::{Entry, Mutation, NewValue, Snapshot, Store};

use crate::convert;
use crate::crd_status::{self, ClaimedNames};
use crate::error::{ApiError, ApiResult, Cause};
use crate::meta::{self, finalizers, is_deleting, meta_str, metadata_mut};
use crate::patch::{self, PatchError};
use crate::registry::Registry;
use crate::resource::Resource;
use crate::strategy;
use crate::validation;

/// The source of the current time for timestamps.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

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
}

/// The result of a delete.
#[derive(Debug, Clone)]
pub struct Deleted {
    /// The object's final form, or its terminating form if it is not gone yet.
    pub object: Value,
    /// Whether the object is gone (false: finalizers or grace are pending).
    pub gone: bool,
}

/// A write decided and queued in the store: its answer, to be given once it is committed.
#[must_use = "a write is acknowledged only once it is committed"]
pub struct PendingWrite<T> {
    pending: tessera_store::Pending<T>,
    /// What follows a committed write (registry refresh, default service account).
    after: Option<AfterCommit>,
}

/// Work that must see the write committed.
struct AfterCommit {
    objects: Objects,
    resource: Resource,
    /// A namespace just created, which gets its default service account.
    namespace: Option<String>,
}

impl AfterCommit {
    fn run(self) {
        self.objects.after_write(self.resource);
        if let Some(namespace) = self.namespace {
            self.objects.ensure_default_service_account(&namespace);
        }
    }
}

impl<T> PendingWrite<T> {
    /// Waits on this thread until the write is committed.
    pub fn wait(self) -> ApiResult<T> {
        let outcome = self.pending.wait()?;
        if let Some(after) = self.after {
            after.run();
        }
        Ok(outcome)
    }

    /// Waits without blocking the thread (the store's committer thread commits it).
    pub async fn committed(self) -> ApiResult<T> {
        let outcome = self.pending.committed().await?;
        if let Some(after) = self.after {
            after.run();
        }
        Ok(outcome)
    }

    /// Changes the answer; the commit waited for stays the same.
    pub fn map<U>(self, change: impl FnOnce(T) -> U) -> PendingWrite<U> {
        PendingWrite {
            pending: self.pending.map(change),
            after: self.after,
        }
    }
}

/// Finalizer that makes the garbage collector delete dependents before the owner.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer that makes the garbage collector orphan dependents before the owner goes.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// Kubernetes object semantics over a [`Store`].
#[derive(Clone)]
pub struct Objects {
    store: Store,
    clock: Clock,
    registry: Arc<Registry>,
    rbac_generation: Arc<std::sync::atomic::AtomicU64>,
}

/// Decodes a stored value.
pub fn decode(entry: &Entry) -> ApiResult<Value> {
    serde_json::from_slice(&entry.value)
        .map_err(|e| ApiError::internal(format!("stored object {} is corrupt: {e}", entry.key)))
}

/// Decodes a stored value into the form a resource serves.
pub fn decode_as(resource: Resource, entry: &Entry) -> ApiResult<Value> {
    Ok(convert::from_storage(resource, decode(entry)?))
}

/// Encodes an object of a resource in its stored form.
/// Encodes an object in its stored form, leaving the place of `metadata.resourceVersion` for
/// the store to write the change's revision in (it is known only once the change is queued).
/// `resourceVersion` comes first in `metadata`; everything else keeps its order.
fn encode_versioned(resource: Resource, object: &Value) -> NewValue {
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
                        out.extend_from_slice(br#"{"resourceVersion":""#);
                        revision_at = Some(out.len());
                        out.push(b'"');
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
    NewValue {
        bytes: out.into(),
        revision_at,
    }
}

/// Appends JSON; writing strings and `Value`s to memory cannot fail.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    if let Err(error) = serde_json::to_writer(out, value) {
        tracing::error!(%error, "cannot encode an object");
    }
}

fn set_resource_version(object: &mut Value, revision: u64) {
    metadata_mut(object).insert("resourceVersion".into(), json!(revision.to_string()));
}

impl Objects {
    /// Objects over a store, with the wall clock.
    pub fn new(store: Store) -> Objects {
        Objects::with_clock(store, Arc::new(SystemTime::now))
    }

    /// Objects over a store with a given clock.
    pub fn with_clock(store: Store, clock: Clock) -> Objects {
        let registry = Arc::new(Registry::load(&store));
        Objects {
            store,
            clock,
            registry,
            rbac_generation: Arc::default(),
        }
    }

    /// A counter bumped by every write to an RBAC object (authorizers cache by it).
    pub fn rbac_generation(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.rbac_generation.clone()
    }

    /// The served resources, built-in and custom.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Creates the `default` ServiceAccount of a namespace if it is missing, as upstream's
    /// service account controller does (synchronously here, so pods can follow at once).
    pub fn ensure_default_service_account(&self, namespace: &str) {
        let Some(accounts) = Resource::find("", "v1", "serviceaccounts") else {
            return;
        };
        if self.get(accounts, Some(namespace), "default").is_ok() {
            return;
        }
        let account =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        if let Err(error) =
            self.create(accounts, Some(namespace), account, &WriteOptions::default())
            && error.code != 409
        {
            tracing::warn!(%namespace, %error, "cannot create the default service account");
        }
    }

    /// For a CRD, the names the other CRDs of its group hold — read before the write's
    /// transaction, as upstream's naming controller reads them from its informer.
    fn crd_claims(&self, resource: Resource, name: &str) -> Option<ClaimedNames> {
        if !is_crd(resource) {
            return None;
        }
        let snapshot = self.store.list(crate::registry::CRD_PREFIX);
        let crds: Vec<Value> = snapshot
            .entries
            .iter()
            .filter_map(|entry| serde_json::from_slice(&entry.value).ok())
            .collect();
        Some(ClaimedNames::by_others(&crds, name))
    }

    /// Keeps the registry in step after a write to a CustomResourceDefinition.
    fn after_write(&self, resource: Resource) {
        if resource.group() == "rbac.authorization.k8s.io" {
            self.rbac_generation
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        if is_crd(resource) {
            self.registry.refresh(&self.store);
        }
    }

    /// The store underneath.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The current time.
    pub fn now(&self) -> SystemTime {
        (self.clock)()
    }

    fn namespace_of(resource: Resource, namespace: Option<&str>) -> Option<&str> {
        if resource.namespaced() {
            namespace
        } else {
            None
        }
    }

    /// Reads one object.
    pub fn get(&self, resource: Resource, namespace: Option<&str>, name: &str) -> ApiResult<Value> {
        let key = resource.key(Self::namespace_of(resource, namespace), name);
        let entry = self
            .store
            .get(&key)
            .ok_or_else(|| ApiError::not_found(resource.group(), resource.plural(), name))?;
        decode_as(resource, &entry)
    }

    /// A consistent snapshot of a resource's objects, optionally in one namespace.
    pub fn list(&self, resource: Resource, namespace: Option<&str>) -> Snapshot {
        self.store
            .list(&resource.prefix(Self::namespace_of(resource, namespace)))
    }

    /// Checks a request body: apiVersion and kind, schema, metadata and kind rules.
    /// Returns warnings for unknown fields (which are removed) or fails.
    fn admit(
        &self,
        resource: Resource,
        object: &mut Value,
        options: &WriteOptions,
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
        let findings = validation::validate_resource(resource, object);
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
        causes.extend(strategy::validate(resource, object));
        if resource.is_custom() && causes.is_empty() {
            causes.extend(crate::rules::check(resource.schema(), object, None));
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

    /// Checks that a namespace exists and is not terminating, for creating content in it.
    fn check_namespace(&self, resource: Resource, namespace: Option<&str>) -> ApiResult<()> {
        if !resource.namespaced() {
            return Ok(());
        }
        let Some(namespace) = namespace else {
            return Err(ApiError::bad_request(
                "a namespace is required to create a namespaced object",
            ));
        };
        let Some(namespaces) = Resource::find("", "v1", "namespaces") else {
            return Ok(());
        };
        let entry = self
            .store
            .get(&namespaces.key(None, namespace))
            .ok_or_else(|| ApiError::not_found("", "namespaces", namespace))?;
        if is_deleting(&decode(&entry)?) {
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

    /// Creates an object in a namespace (ignored for cluster-scoped kinds).
    pub fn create(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        object: Value,
        options: &WriteOptions,
    ) -> ApiResult<Written> {
        self.create_pending(resource, namespace, object, options)?
            .wait()
    }

    /// [`Objects::create`], answered once the returned write is committed.
    pub fn create_pending(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        mut object: Value,
        options: &WriteOptions,
    ) -> ApiResult<PendingWrite<Written>> {
        let namespace = Self::namespace_of(resource, namespace);
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
        let generate = meta_str(&object, "name").is_none_or(str::is_empty);
        let prefix = meta_str(&object, "generateName").map(str::to_string);
        if generate {
            match &prefix {
                Some(prefix) if !prefix.is_empty() => {
                    metadata_mut(&mut object)
                        .insert("name".into(), json!(meta::generate_name(prefix)));
                }
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
        strategy::reset_status(resource, &mut object);
        let warnings = self.admit(resource, &mut object, options)?;
        self.check_namespace(resource, namespace)?;

        let now = meta::timestamp(self.now());
        {
            let metadata = metadata_mut(&mut object);
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
            metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            metadata.insert("creationTimestamp".into(), json!(now));
            metadata.insert("generation".into(), json!(1));
        }
        strategy::prepare_for_create(resource, &mut object);
        if let Some(claims) =
            self.crd_claims(resource, meta_str(&object, "name").unwrap_or_default())
        {
            object["status"] = crd_status::status(&object, &now, &claims);
        }
        meta::normalize_metadata(&mut object);
        if let Some(manager) = &options.field_manager {
            crate::ssa::record_update(
                &json!({}),
                &mut object,
                manager,
                &resource.info.api_version(),
                &now,
                options.subresource,
                resource.schema(),
            );
        }
        crate::admission::admit_create(self, resource, namespace, &mut object)?;

        // A generated name may collide; upstream retries with a new suffix.
        for attempt in 0..8 {
            let name = meta_str(&object, "name").unwrap_or_default().to_string();
            let key = resource.key(namespace, &name);
            let mut stored = None;
            let pending = self.store.decide(&key, |current| {
                if current.is_some() {
                    return Err(ApiError::already_exists(
                        resource.group(),
                        resource.plural(),
                        &name,
                    ));
                }
                let result = object.clone();
                if options.dry_run {
                    stored = Some(result);
                    return Ok(Mutation::Keep);
                }
                let value = encode_versioned(resource, &result);
                stored = Some(result);
                Ok(Mutation::Put(value))
            })?;
            match pending.transpose() {
                Ok(pending) => {
                    let mut stored = stored.unwrap_or(Value::Null);
                    if !options.dry_run {
                        set_resource_version(&mut stored, pending.revision());
                    }
                    let namespace_created = (is_namespace(resource) && !options.dry_run)
                        .then(|| meta_str(&object, "name").unwrap_or_default().to_string());
                    let written = Written {
                        object: stored,
                        warnings,
                        created: true,
                    };
                    return Ok(PendingWrite {
                        pending: pending.map(|_| written),
                        after: Some(self.after_commit(resource, namespace_created)),
                    });
                }
                Err(error) if error.reason == "AlreadyExists" && generate && attempt < 7 => {
                    if let Some(prefix) = &prefix {
                        metadata_mut(&mut object)
                            .insert("name".into(), json!(meta::generate_name(prefix)));
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Err(ApiError::internal("could not generate a unique name"))
    }

    fn after_commit(&self, resource: Resource, namespace: Option<String>) -> AfterCommit {
        AfterCommit {
            objects: self.clone(),
            resource,
            namespace,
        }
    }

    /// Replaces an object (PUT), with optimistic concurrency on `metadata.resourceVersion`;
    /// answered once the returned write is committed.
    pub fn update_pending(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        mut object: Value,
        part: Part,
        options: &WriteOptions,
    ) -> ApiResult<PendingWrite<Written>> {
        let warnings = self.admit(resource, &mut object, options)?;
        if meta_str(&object, "name").is_some_and(|given| given != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&object, "name").unwrap_or_default()
            )));
        }
        let precondition = meta_str(&object, "resourceVersion").map(str::to_string);
        let written = self.write(
            resource,
            namespace,
            name,
            options,
            |current| {
                if let Some(wanted) = &precondition
                    && meta_str(current, "resourceVersion") != Some(wanted.as_str())
                {
                    return Err(ApiError::modified(
                        resource.group(),
                        resource.plural(),
                        name,
                    ));
                }
                Ok(object)
            },
            part,
        )?;
        Ok(written.map(|mut written| {
            written.warnings.extend(warnings);
            written
        }))
    }

    /// Patches an object; the patch is applied to the stored object inside the transaction.
    pub fn patch(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        body: &PatchBody,
        part: Part,
        options: &WriteOptions,
    ) -> ApiResult<Written> {
        self.patch_pending(resource, namespace, name, body, part, options)?
            .wait()
    }

    /// [`Objects::patch`], answered once the returned write is committed.
    pub fn patch_pending(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        body: &PatchBody,
        part: Part,
        options: &WriteOptions,
    ) -> ApiResult<PendingWrite<Written>> {
        let schema = resource.schema();
        let mut warnings = Vec::new();
        let written = self.write(
            resource,
            namespace,
            name,
            options,
            |current| {
                let patched = match body {
                    PatchBody::Json(bytes) => patch::json_patch(current, bytes),
                    PatchBody::Merge(value) => patch::merge_patch(current, value),
                    PatchBody::Strategic(_) if resource.is_custom() => {
                    return Err(ApiError::unsupported_media_type(
                        "application/strategic-merge-patch+json (strategic merge patch is not supported for custom resources)",
                    ));
                }
                PatchBody::Strategic(value) => patch::strategic_merge(current, value, schema),
                PatchBody::Apply { config, manager, force } => {
                    let now = meta::timestamp(self.now());
                    let api_version = resource.info.api_version();
                    match crate::ssa::apply(current, config, manager, &api_version, &now, *force, schema) {
                        Ok(applied) => Ok(applied.object),
                        Err(conflicts) => return Err(apply_conflict(resource, name, &conflicts)),
                    }
                }
                }
                .map_err(|error| match error {
                    PatchError::Malformed(message) => ApiError::bad_request(message),
                    PatchError::DoesNotApply(message) => {
                        let mut error =
                            ApiError::invalid(resource.group(), resource.kind(), name, vec![]);
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
                warnings = self.admit(resource, &mut patched, options)?;
                Ok(patched)
            },
            part,
        )?;
        Ok(written.map(|written| Written {
            warnings,
            ..written
        }))
    }

    /// Updates an object by a function of its stored form, inside one transaction — the
    /// update path of controllers. Server-owned fields, status handling, generation and
    /// finalizers are applied as for client updates.
    pub fn update_with(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        part: Part,
        change: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<Written> {
        self.write(
            resource,
            namespace,
            name,
            &WriteOptions::default(),
            change,
            part,
        )?
        .wait()
    }

    /// [`Objects::update_with`] for a client's request, with its options (dry run, field
    /// manager, subresource); answered once the returned write is committed.
    pub fn update_with_options_pending(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        part: Part,
        options: &WriteOptions,
        change: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<PendingWrite<Written>> {
        self.write(resource, namespace, name, options, change, part)
    }

    /// The shared update path: `change` turns the stored object into the requested one;
    /// server-owned fields, status handling, generation and finalizers are then applied.
    fn write(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        options: &WriteOptions,
        change: impl FnOnce(&Value) -> ApiResult<Value>,
        part: Part,
    ) -> ApiResult<PendingWrite<Written>> {
        let key = resource.key(Self::namespace_of(resource, namespace), name);
        let claims = self.crd_claims(resource, name);
        let mut stored = None;
        let mut versioned = false;
        let pending = self
            .store
            .decide(&key, |current| {
                let current = current.ok_or_else(|| {
                    ApiError::not_found(resource.group(), resource.plural(), name)
                })?;
                let current = decode_as(resource, current)?;
                let requested = change(&current)?;
                let mut next = merge_update(resource, &current, requested, part);
                if let Some(claims) = &claims {
                    next["status"] =
                        crd_status::status(&next, &meta::timestamp(self.now()), claims);
                }
                meta::normalize_metadata(&mut next);
                if let Some(manager) = &options.field_manager {
                    let now = meta::timestamp(self.now());
                    crate::ssa::record_update(
                        &current,
                        &mut next,
                        manager,
                        &resource.info.api_version(),
                        &now,
                        options.subresource,
                        resource.schema(),
                    );
                }
                let mut causes = strategy::validate_update(resource, &current, &next);
                if resource.is_custom() {
                    // Transition rules see the stored object as oldSelf.
                    for cause in crate::rules::check(resource.schema(), &next, Some(&current)) {
                        if !causes.contains(&cause) {
                            causes.push(cause);
                        }
                    }
                }
                if !causes.is_empty() {
                    return Err(ApiError::invalid(
                        resource.group(),
                        resource.kind(),
                        name,
                        causes,
                    ));
                }
                if next == current {
                    stored = Some(current);
                    return Ok(Mutation::Keep);
                }
                if options.dry_run {
                    stored = Some(next);
                    return Ok(Mutation::Keep);
                }
                let value = encode_versioned(resource, &next);
                let deleted = is_deleting(&next) && !holds_deletion(resource, &next);
                stored = Some(next);
                versioned = true;
                Ok(if deleted {
                    Mutation::Delete(value)
                } else {
                    Mutation::Put(value)
                })
            })?
            .transpose()?;
        let mut stored = stored.unwrap_or(Value::Null);
        if versioned {
            set_resource_version(&mut stored, pending.revision());
        }
        let written = Written {
            object: stored,
            warnings: Vec::new(),
            created: false,
        };
        Ok(PendingWrite {
            pending: pending.map(|_| written),
            after: Some(self.after_commit(resource, None)),
        })
    }

    /// Deletes an object, honouring finalizers, propagation and pod grace periods.
    pub fn delete(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
        dry_run: bool,
    ) -> ApiResult<Deleted> {
        self.delete_pending(resource, namespace, name, options, dry_run)?
            .wait()
    }

    /// [`Objects::delete`], answered once the returned write is committed.
    pub fn delete_pending(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
        dry_run: bool,
    ) -> ApiResult<PendingWrite<Deleted>> {
        let key = resource.key(Self::namespace_of(resource, namespace), name);
        // Read outside the transaction: a transaction may not call back into the store.
        let node_of = |object: &Value| {
            object
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let bound_node = self
            .store
            .get(&key)
            .and_then(|entry| decode(&entry).ok())
            .and_then(|o| node_of(&o));
        let bound_node_exists = bound_node.as_deref().is_some_and(|node| {
            Resource::find("", "v1", "nodes")
                .is_some_and(|nodes| self.store.get(&nodes.key(None, node)).is_some())
        });
        let node_exists = |node: &str| bound_node.as_deref() != Some(node) || bound_node_exists;
        let now = self.now();
        let mut result = None;
        let pending = self.store.decide(&key, |current| {
            let current = current
                .ok_or_else(|| ApiError::not_found(resource.group(), resource.plural(), name))?;
            let mut object = decode_as(resource, current)?;
            if let Some(uid) = &options.precondition_uid
                && meta_str(&object, "uid") != Some(uid.as_str())
            {
                return Err(ApiError::conflict(
                    resource.group(),
                    resource.plural(),
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&object, "uid").unwrap_or_default()
                    ),
                ));
            }
            if let Some(version) = &options.precondition_resource_version
                && meta_str(&object, "resourceVersion") != Some(version.as_str())
            {
                return Err(ApiError::conflict(
                    resource.group(),
                    resource.plural(),
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {version}, ResourceVersion in object meta: {}",
                        meta_str(&object, "resourceVersion").unwrap_or_default()
                    ),
                ));
            }
            let mut finalizer_list = finalizers(&object);
            let add_finalizer = match options.propagation {
                Some(Propagation::Foreground) => Some(FOREGROUND_FINALIZER),
                Some(Propagation::Orphan) => Some(ORPHAN_FINALIZER),
                _ => None,
            };
            if let Some(finalizer) = add_finalizer
                && !finalizer_list.iter().any(|f| f == finalizer)
                && !is_deleting(&object)
            {
                finalizer_list.push(finalizer.to_string());
            }
            let grace = pod_grace_seconds(resource, &object, options, &node_exists);
            let needs_namespace_cleanup = is_namespace(resource) && !namespace_finalizers(&object).is_empty();
            let keep = !finalizer_list.is_empty() || grace > 0 || needs_namespace_cleanup;
            if keep {
                let already = is_deleting(&object);
                let metadata = metadata_mut(&mut object);
                if !finalizer_list.is_empty() {
                    metadata.insert("finalizers".into(), json!(finalizer_list));
                }
                if !already {
                    let at = now + Duration::from_secs(u64::try_from(grace).unwrap_or(0));
                    metadata.insert("deletionTimestamp".into(), json!(meta::timestamp(at)));
                    metadata.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    let generation = metadata.get("generation").and_then(Value::as_i64).unwrap_or(0);
                    metadata.insert("generation".into(), json!(generation + 1));
                } else if grace == 0 && resource.kind() == "Pod" && finalizer_list.is_empty() {
                    // A second delete with no grace finishes a terminating pod.
                    let value = encode_versioned(resource, &object);
                    result = Some(Deleted { object, gone: true });
                    return Ok(if dry_run { Mutation::Keep } else { Mutation::Delete(value) });
                } else {
                    metadata.insert("deletionGracePeriodSeconds".into(), json!(grace));
                }
                if needs_namespace_cleanup {
                    object["status"]["phase"] = json!("Terminating");
                }
                let value = encode_versioned(resource, &object);
                result = Some(Deleted { object, gone: false });
                return Ok(if dry_run { Mutation::Keep } else { Mutation::Put(value) });
            }
            let value = encode_versioned(resource, &object);
            result = Some(Deleted { object, gone: true });
            Ok(if dry_run { Mutation::Keep } else { Mutation::Delete(value) })
        })?
        .transpose()?;
        let mut deleted = result.ok_or_else(|| ApiError::internal("delete produced no result"))?;
        if !dry_run {
            set_resource_version(&mut deleted.object, pending.revision());
        }
        Ok(PendingWrite {
            pending: pending.map(|_| deleted),
            after: Some(self.after_commit(resource, None)),
        })
    }
}

/// A pod's grace period: its node twin must confirm termination unless the pod never ran,
/// already finished, is bound to a node that does not exist, or the grace period is zero.
fn pod_grace_seconds(
    resource: Resource,
    pod: &Value,
    options: &DeleteOptions,
    node_exists: &dyn Fn(&str) -> bool,
) -> i64 {
    if (resource.group(), resource.kind()) != ("", "Pod") {
        return 0;
    }
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str);
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    let runs = node.is_some_and(node_exists) && !matches!(phase, Some("Succeeded" | "Failed"));
    if !runs {
        return 0;
    }
    options
        .grace_period_seconds
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}

fn is_namespace(resource: Resource) -> bool {
    (resource.group(), resource.kind()) == ("", "Namespace")
}

/// A namespace's `spec.finalizers` (the namespace controller's `kubernetes`).
pub fn namespace_finalizers(namespace: &Value) -> Vec<String> {
    namespace
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether something still holds a terminating object: finalizers, a namespace's content
/// finalizer, or a pod's kubelet (a pod on a node with grace left).
fn holds_deletion(resource: Resource, object: &Value) -> bool {
    let kubelet = (resource.group(), resource.kind()) == ("", "Pod")
        && object
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|grace| grace > 0);
    let namespace = is_namespace(resource) && !namespace_finalizers(object).is_empty();
    !finalizers(object).is_empty() || kubelet || namespace
}

/// Combines the stored object with a requested one: server-owned metadata is kept, status or
/// the rest is kept depending on the part addressed, and generation follows spec changes.
fn merge_update(resource: Resource, current: &Value, requested: Value, part: Part) -> Value {
    let mut next = match part {
        Part::Status => {
            let mut next = current.clone();
            match requested.get("status") {
                Some(status) => next["status"] = status.clone(),
                None => {
                    if let Some(map) = next.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
            next
        }
        Part::Main => {
            let mut next = requested;
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
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        metadata_mut(&mut next).insert("generation".into(), json!(generation + 1));
    }
    next
}

/// The 409 an apply answers when it would change fields other managers own.
fn apply_conflict(resource: Resource, name: &str, conflicts: &[crate::ssa::Conflict]) -> ApiError {
    let listed: Vec<String> = conflicts
        .iter()
        .map(|c| {
            format!(
                "conflict with \"{}\" using {}: {}",
                c.manager, c.api_version, c.field
            )
        })
        .collect();
    let summary = if conflicts.len() == 1 {
        format!("Apply failed with 1 conflict: {}", listed[0])
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            listed.join("\n")
        )
    };
    let mut error = ApiError::conflict(resource.group(), resource.plural(), name, "");
    error.message = summary;
    if let Some(details) = error.details.as_mut() {
        details.causes = conflicts
            .iter()
            .map(|c| Cause {
                reason: "FieldManagerConflict",
                field: c.field.clone(),
                message: format!("conflict with \"{}\" using {}", c.manager, c.api_version),
            })
            .collect();
    }
    error
}

fn is_crd(resource: Resource) -> bool {
    (resource.group(), resource.kind()) == ("apiextensions.k8s.io", "CustomResourceDefinition")
}
