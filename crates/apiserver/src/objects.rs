//! Kubernetes object semantics over the revisioned store: create, read, update, patch and
//! delete with server-set metadata, optimistic concurrency, generation, finalizers, graceful
//! pod deletion, namespace lifecycle, dry runs and field validation.
//!
//! Every write is one read-modify-write transaction of the store, so patches and
//! preconditions are evaluated against the exact stored object. What each write decides is
//! `tessera_api::write`'s; this module reads and commits, holds the clock and the seeded id
//! generator, keeps the registry and the RBAC generation in step, and implements the core's
//! [`Lister`] over the store. Knows nothing about HTTP: the REST handlers, the garbage
//! collector and the namespace controller all call this.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_api::convert;
use tessera_api::crd_status::ClaimedNames;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::lister::Lister;
use tessera_api::meta::{is_deleting, meta_str};
use tessera_api::resource::Resource;
use tessera_api::service_allocation::{Grant, ServiceRanges};
use tessera_api::write::{
    self, DeleteOptions, Deleted, Deletion, Part, PatchBody, WriteOptions, Written, is_crd,
    is_namespace,
};
use tessera_model::clock::Clock;
use tessera_model::ids::Ids;
use tessera_store::{Entry, Mutation, NewValue, Snapshot, Store};

use crate::error::StoreResultExt;
use crate::namespace_facts::NamespaceMemo;
use crate::pod_security::{self, Admitted};
use crate::registry::Registry;
use crate::service_book::{ServiceBook, is_services};
use tessera_api::write::NamespaceFacts;

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
        let outcome = self.pending.wait().or_api()?;
        if let Some(after) = self.after {
            after.run();
        }
        Ok(outcome)
    }

    /// Waits without blocking the thread (the store's committer thread commits it).
    pub async fn committed(self) -> ApiResult<T> {
        let outcome = self.pending.committed().await.or_api()?;
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

/// Kubernetes object semantics over a [`Store`].
#[derive(Clone)]
pub struct Objects {
    store: Store,
    clock: Clock,
    ids: Arc<Ids>,
    registry: Arc<Registry>,
    rbac_generation: Arc<std::sync::atomic::AtomicU64>,
    /// What Kueue's Job webhook reads from its Configuration.
    kueue: Arc<tessera_api::admission::KueueJobDefaulting>,
    /// Who holds which Service ClusterIP and node port.
    services: ServiceBook,
    /// Pod Security admission.
    pod_security: Arc<tessera_podsecurity::PodSecurity>,
    /// What creates read of their namespace, by its revision.
    namespaces: Arc<NamespaceMemo>,
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

/// The object a read-modify-write reads: the stored entry in the form its resource serves,
/// or the 404 of an object that is not there.
fn stored_object(resource: Resource, name: &str, current: Option<&Entry>) -> ApiResult<Value> {
    let current =
        current.ok_or_else(|| ApiError::not_found(resource.group(), resource.plural(), name))?;
    decode_as(resource, current)
}

/// The stored bytes of a written entry, when they are also what the resource serves.
fn served_bytes(resource: Resource, entry: Option<Entry>) -> Option<bytes::Bytes> {
    entry
        .filter(|_| convert::stored_as_served(resource))
        .map(|entry| entry.value)
}

/// Encodes an object in its stored form, leaving the place of `metadata.resourceVersion` for
/// the store to write the change's revision in.
fn encode_versioned(resource: Resource, object: &Value) -> NewValue {
    stored_value(write::encode_versioned(resource, object))
}

/// An encoded stored form as the store takes it.
fn stored_value(encoded: write::Encoded) -> NewValue {
    NewValue {
        bytes: encoded.bytes.into(),
        revision_at: encoded.revision_at,
    }
}

impl Objects {
    /// Objects over a store, with the wall clock and ids seeded from the host's entropy.
    pub fn new(store: Store) -> Objects {
        Objects::with_clock(store, Arc::new(SystemTime::now))
    }

    /// Objects over a store with a given clock (ids seeded from the host's entropy).
    pub fn with_clock(store: Store, clock: Clock) -> Objects {
        Objects::with_clock_and_ids(store, clock, Ids::seeded(fastrand::u64(..)))
    }

    /// Objects over a store with a given clock and id generator (fixed in tests).
    pub fn with_clock_and_ids(store: Store, clock: Clock, ids: Ids) -> Objects {
        let registry = Arc::new(Registry::load(&store));
        let services = ServiceBook::load(&store, ServiceRanges::default());
        Objects {
            services,
            store,
            clock,
            ids: Arc::new(ids),
            registry,
            rbac_generation: Arc::default(),
            kueue: Arc::default(),
            pod_security: pod_security::default_admission(),
            namespaces: Arc::default(),
        }
    }

    /// These objects with Pod Security admission configured (`--admission-control-config-file`).
    pub fn with_pod_security(mut self, admission: tessera_podsecurity::PodSecurity) -> Objects {
        self.pod_security = Arc::new(admission);
        self
    }

    /// The facts of the namespace a Pod Security subject's policy comes from (its
    /// `policy_view`), read before its transaction.
    fn policy_namespace(
        &self,
        subject: pod_security::Subject,
        namespace: Option<&str>,
    ) -> Option<Arc<NamespaceFacts>> {
        if subject == pod_security::Subject::Namespace {
            return None;
        }
        let namespaces = Resource::find("", "v1", "namespaces")?;
        let entry = self.store.get(&namespaces.key(None, namespace?))?;
        self.namespaces.facts(&entry).ok()
    }

    /// Pod Security admission of a create.
    fn admit_pod_security_create(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        options: &WriteOptions,
        object: &Value,
    ) -> ApiResult<Admitted> {
        let Some(subject) = pod_security::subject(resource) else {
            return Ok(Admitted::default());
        };
        let policy_namespace = self.policy_namespace(subject, namespace);
        pod_security::admit(
            &self.pod_security,
            subject,
            resource,
            policy_namespace.as_ref().map(|facts| &facts.policy_view),
            options,
            options.subresource,
            object,
            None,
        )
    }

    /// Checks a namespace's existing pods against its new enforce level, as upstream warns
    /// when a namespace's enforce label tightens.
    fn check_existing_pods(
        &self,
        namespace: &str,
        enforce: tessera_podsecurity::LevelVersion,
    ) -> Vec<String> {
        let Some(pods) = Resource::find("", "v1", "pods") else {
            return Vec::new();
        };
        let snapshot = self.list(pods, Some(namespace));
        let pods: Vec<Value> = snapshot
            .entries
            .iter()
            .filter_map(|entry| decode(entry).ok())
            .collect();
        self.pod_security
            .evaluate_pods_in_namespace(namespace, enforce, &pods)
    }

    /// These objects with Kueue's Job defaulting following its Configuration.
    pub fn with_kueue_job_defaulting(
        mut self,
        kueue: tessera_api::admission::KueueJobDefaulting,
    ) -> Objects {
        self.kueue = Arc::new(kueue);
        self
    }

    /// These objects with Services allocating from `ranges` (the topology's `networking`).
    pub fn with_service_ranges(mut self, ranges: ServiceRanges) -> Objects {
        self.services = ServiceBook::load(&self.store, ranges);
        self
    }

    /// The ranges Services allocate from.
    pub fn service_ranges(&self) -> ServiceRanges {
        self.services.ranges()
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
        let snapshot = self.store.list(tessera_api::crd::CRD_PREFIX);
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
        let facts = self.namespaces.facts(&entry).map_err(|e| {
            ApiError::internal(format!("stored object {} is corrupt: {e}", entry.key))
        })?;
        write::check_namespace_open(resource, namespace, facts.terminating)
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
        let creation = write::begin_create(resource, namespace, &mut object, options, &self.ids)?;
        let warnings = creation.warnings;
        self.check_namespace(resource, namespace)?;
        let claims = self.crd_claims(resource, meta_str(&object, "name").unwrap_or_default());
        write::stamp_create(
            resource,
            namespace,
            &mut object,
            options,
            self.now(),
            &self.ids,
            claims.as_ref(),
        );
        tessera_api::admission::admit_create(self, &self.kueue, resource, namespace, &mut object)?;
        let admitted = self.admit_pod_security_create(resource, namespace, options, &object)?;
        let mut warnings = warnings;
        warnings.extend(admitted.warnings);
        let audit_annotations = admitted.audit_annotations;

        // A generated name may collide; upstream retries with a new suffix.
        for attempt in 0..8 {
            let name = meta_str(&object, "name").unwrap_or_default().to_string();
            let key = resource.key(namespace, &name);
            // A Service allocates under its key's lock, so the book and the store agree.
            let service_owner = is_services(resource).then(|| ServiceBook::owner(namespace, &name));
            let mut grant = Grant::default();
            // Encoded before the key's lock is taken, from the object itself: the answer
            // keeps the object, and the stored bytes answer the client.
            let value = (!options.dry_run && service_owner.is_none())
                .then(|| encode_versioned(resource, &object));
            let decided = self
                .store
                .decide(&key, |current| {
                    if current.is_some() {
                        return Err(ApiError::already_exists(
                            resource.group(),
                            resource.plural(),
                            &name,
                        ));
                    }
                    if let Some(owner) = &service_owner {
                        grant = self.services.create(owner, &mut object, options.dry_run)?;
                        return Ok(if options.dry_run {
                            Mutation::Keep
                        } else {
                            Mutation::Put(encode_versioned(resource, &object))
                        });
                    }
                    Ok(value.map_or(Mutation::Keep, Mutation::Put))
                })
                .or_api();
            let pending = match decided {
                Ok(pending) => pending,
                Err(error) => {
                    if let Some(owner) = &service_owner {
                        self.services.revert(owner, &grant);
                    }
                    return Err(error);
                }
            };
            match pending.transpose() {
                Ok(pending) => {
                    let namespace_created =
                        (is_namespace(resource) && !options.dry_run).then(|| name.clone());
                    let mut stored = object;
                    if !options.dry_run {
                        write::set_resource_version(&mut stored, pending.revision());
                    }
                    let pending = pending.map(|entry| Written {
                        object: stored,
                        warnings,
                        created: true,
                        encoded: served_bytes(resource, entry),
                        audit_annotations,
                    });
                    return Ok(PendingWrite {
                        pending,
                        after: Some(self.after_commit(resource, namespace_created)),
                    });
                }
                Err(error)
                    if error.reason == "AlreadyExists" && creation.generated && attempt < 7 =>
                {
                    if let Some(prefix) = &creation.prefix {
                        write::regenerate_name(&mut object, prefix, &self.ids);
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
        let (warnings, precondition) = write::begin_update(resource, name, &mut object, options)?;
        let written = self.write(
            resource,
            namespace,
            name,
            options,
            |current| {
                write::check_precondition(resource, name, current, precondition.as_deref())?;
                Ok(object)
            },
            part,
        )?;
        Ok(written.map(|mut written| {
            let admission = std::mem::replace(&mut written.warnings, warnings);
            written.warnings.extend(admission);
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
        let mut warnings = Vec::new();
        let now = self.now();
        let written = self.write(
            resource,
            namespace,
            name,
            options,
            |current| {
                let (patched, body_warnings) =
                    write::apply_patch(resource, name, current, body, options, now)?;
                warnings = body_warnings;
                Ok(patched)
            },
            part,
        )?;
        Ok(written.map(|mut written| {
            let admission = std::mem::replace(&mut written.warnings, warnings);
            written.warnings.extend(admission);
            written
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
        let now = self.now();
        let service_owner = is_services(resource)
            .then(|| ServiceBook::owner(Self::namespace_of(resource, namespace), name));
        let mut stored = None;
        let mut versioned = false;
        // Status writes are never evaluated (upstream ignores the subresource), so they read
        // no namespace either.
        let pod_security_subject = pod_security::subject(resource)
            .filter(|subject| {
                part == Part::Main
                    && pod_security::evaluates(*subject, pod_security::subresource(part, options))
            })
            .map(|subject| {
                let policy_namespace = self.policy_namespace(subject, namespace);
                (subject, policy_namespace)
            });
        let mut admitted = Admitted::default();
        // PersistentVolumeClaimResize reads the claim's class (a claim's class is immutable,
        // so the stored claim names it).
        let resize_class = (part == Part::Main
            && resource.group().is_empty()
            && resource.plural() == "persistentvolumeclaims")
            .then(|| self.claim_class(namespace, name));
        let pending = self
            .store
            .decide(&key, |current| {
                let current = stored_object(resource, name, current)?;
                let mut requested = change(&current)?;
                let grant = match (&service_owner, part) {
                    (Some(owner), Part::Main) => {
                        self.services.update(owner, &current, &mut requested)?
                    }
                    _ => Grant::default(),
                };
                let give_back = || {
                    if let Some(owner) = &service_owner {
                        self.services.revert(owner, &grant);
                    }
                };
                let next = match write::next_version(
                    resource,
                    name,
                    &current,
                    requested,
                    part,
                    options,
                    now,
                    claims.as_ref(),
                ) {
                    Ok(next) => next,
                    Err(error) => {
                        give_back();
                        return Err(error);
                    }
                };
                if let Some(class) = &resize_class
                    && let Err(detail) =
                        tessera_storage::expansion::admit_resize(&current, &next, class.as_ref())
                {
                    give_back();
                    return Err(ApiError::forbidden(
                        resource.group(),
                        resource.plural(),
                        name,
                        detail,
                    ));
                }
                if let Some((subject, policy_namespace)) = &pod_security_subject {
                    admitted = match pod_security::admit(
                        &self.pod_security,
                        *subject,
                        resource,
                        policy_namespace.as_ref().map(|facts| &facts.policy_view),
                        options,
                        pod_security::subresource(part, options),
                        &next,
                        Some(&current),
                    ) {
                        Ok(admitted) => admitted,
                        Err(error) => {
                            give_back();
                            return Err(error);
                        }
                    };
                }
                if next == current {
                    give_back();
                    stored = Some(current);
                    return Ok(Mutation::Keep);
                }
                if options.dry_run {
                    give_back();
                    stored = Some(next);
                    return Ok(Mutation::Keep);
                }
                let value = encode_versioned(resource, &next);
                let deleted = is_deleting(&next) && !write::holds_deletion(resource, &next);
                if let Some(owner) = &service_owner {
                    self.services.settle(owner, (!deleted).then_some(&next));
                }
                stored = Some(next);
                versioned = true;
                Ok(if deleted {
                    Mutation::Delete(value)
                } else {
                    Mutation::Put(value)
                })
            })
            .or_api()?
            .transpose()?;
        let mut stored = stored.unwrap_or(Value::Null);
        if versioned {
            write::set_resource_version(&mut stored, pending.revision());
        }
        if let Some(enforce) = admitted.check_pods {
            admitted
                .warnings
                .extend(self.check_existing_pods(name, enforce));
        }
        Ok(PendingWrite {
            pending: pending.map(|entry| Written {
                object: stored,
                warnings: admitted.warnings,
                audit_annotations: admitted.audit_annotations,
                created: false,
                encoded: if versioned {
                    served_bytes(resource, entry)
                } else {
                    None
                },
            }),
            after: Some(self.after_commit(resource, None)),
        })
    }

    /// Writes the whole stored object as upstream's registry does past its strategy
    /// (`GuaranteedUpdate`, as the pod binding does): `change` gets the stored form's bytes
    /// (of a kind stored as it is served) and gives the next stored form; no strategy,
    /// validation, admission or managed fields apply. A dry run decides and keeps the
    /// stored object.
    pub fn guaranteed_update_pending(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        dry_run: bool,
        change: impl FnOnce(&[u8]) -> ApiResult<write::Encoded>,
    ) -> ApiResult<PendingWrite<()>> {
        if !convert::stored_as_served(resource) {
            return Err(ApiError::internal(format!(
                "{} is not stored as it is served",
                resource.plural()
            )));
        }
        let key = resource.key(Self::namespace_of(resource, namespace), name);
        let pending = self
            .store
            .decide(&key, |current| {
                let current = current.ok_or_else(|| {
                    ApiError::not_found(resource.group(), resource.plural(), name)
                })?;
                let next = change(&current.value)?;
                Ok(if dry_run {
                    Mutation::Keep
                } else {
                    Mutation::Put(stored_value(next))
                })
            })
            .or_api()?
            .transpose()?;
        Ok(PendingWrite {
            pending: pending.map(drop),
            after: Some(self.after_commit(resource, None)),
        })
    }

    /// The StorageClass the stored claim `namespace/name` names, when both exist.
    fn claim_class(&self, namespace: Option<&str>, name: &str) -> Option<Value> {
        let claims = Resource::find("", "v1", "persistentvolumeclaims")?;
        let claim = self.get(claims, namespace, name).ok()?;
        let class_name = tessera_storage::objects::claim_class(&claim).to_string();
        let classes = Resource::find("storage.k8s.io", "v1", "storageclasses")?;
        self.get(classes, None, &class_name).ok()
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
        let service_owner = is_services(resource)
            .then(|| ServiceBook::owner(Self::namespace_of(resource, namespace), name));
        let mut result = None;
        let pending = self
            .store
            .decide(&key, |current| {
                let mut object = stored_object(resource, name, current)?;
                let deletion =
                    write::decide_delete(resource, name, &mut object, options, &node_exists, now)?;
                let value = encode_versioned(resource, &object);
                Ok(match deletion {
                    Deletion::Remove => {
                        result = Some(Deleted { object, gone: true });
                        if dry_run {
                            Mutation::Keep
                        } else {
                            if let Some(owner) = &service_owner {
                                self.services.settle(owner, None);
                            }
                            Mutation::Delete(value)
                        }
                    }
                    Deletion::Terminate => {
                        result = Some(Deleted {
                            object,
                            gone: false,
                        });
                        if dry_run {
                            Mutation::Keep
                        } else {
                            Mutation::Put(value)
                        }
                    }
                })
            })
            .or_api()?
            .transpose()?;
        let mut deleted = result.ok_or_else(|| ApiError::internal("delete produced no result"))?;
        if !dry_run {
            write::set_resource_version(&mut deleted.object, pending.revision());
        }
        Ok(PendingWrite {
            pending: pending.map(|_| deleted),
            after: Some(self.after_commit(resource, None)),
        })
    }
}

impl Lister for Objects {
    fn list(&self, resource: Resource, namespace: Option<&str>) -> Vec<Value> {
        Objects::list(self, resource, namespace)
            .entries
            .iter()
            .filter_map(|entry| decode(entry).ok())
            .collect()
    }

    fn list_stored(&self, resource: Resource, namespace: Option<&str>) -> Vec<bytes::Bytes> {
        Objects::list(self, resource, namespace)
            .entries
            .iter()
            .map(|entry| entry.value.clone())
            .collect()
    }

    fn get(&self, resource: Resource, namespace: Option<&str>, name: &str) -> Option<Value> {
        Objects::get(self, resource, namespace, name).ok()
    }

    fn exists(&self, resource: Resource, namespace: Option<&str>, name: &str) -> bool {
        let key = resource.key(Self::namespace_of(resource, namespace), name);
        self.store.get(&key).is_some()
    }

    fn resources(&self) -> Vec<Resource> {
        self.registry.all()
    }
}
