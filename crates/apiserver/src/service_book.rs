//! The shell of Service allocation: one [`Allocations`] book per server behind a mutex,
//! rebuilt from the stored Services when the server starts (so nothing but the Services
//! themselves is stored), and consulted by `objects.rs` inside each Service write's store
//! transaction — so the book and the store change together under the Service's key lock.
//!
//! Decides nothing: what is allocated, refused or released is `tessera_api::service_allocation`'s.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tessera_api::error::ApiResult;
use tessera_api::resource::Resource;
use tessera_api::service_allocation::{Allocations, Grant, ServiceRanges, owner_of};
use tessera_store::Store;

/// The server's book of Service ClusterIPs and node ports.
#[derive(Clone, Default)]
pub struct ServiceBook {
    book: Arc<Mutex<Allocations>>,
}

/// Whether a resource is core/v1 Services.
pub fn is_services(resource: Resource) -> bool {
    resource.group().is_empty() && resource.plural() == "services"
}

impl ServiceBook {
    /// The book the Services stored in `store` imply, over `ranges`.
    pub fn load(store: &Store, ranges: ServiceRanges) -> ServiceBook {
        let Some(services) = Resource::find("", "v1", "services") else {
            return ServiceBook::default();
        };
        let stored: Vec<(String, Value)> = store
            .list(&services.prefix(None))
            .entries
            .iter()
            .filter_map(|entry| crate::objects::decode(entry).ok())
            .map(|service| {
                let owner = owner_of(
                    tessera_api::meta::meta_str(&service, "namespace").unwrap_or_default(),
                    tessera_api::meta::meta_str(&service, "name").unwrap_or_default(),
                );
                (owner, service)
            })
            .collect();
        let book = Allocations::restore(ranges, stored.iter().map(|(o, s)| (o.clone(), s)));
        ServiceBook {
            book: Arc::new(Mutex::new(book)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Allocations> {
        // The book is consistent between calls: a panic inside one leaves nothing half-done
        // that a later call could trip over.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The ranges the book allocates from.
    pub fn ranges(&self) -> ServiceRanges {
        self.lock().ranges()
    }

    /// Allocates for a new Service; a dry run gives everything back at once.
    pub fn create(&self, owner: &str, service: &mut Value, dry_run: bool) -> ApiResult<Grant> {
        let mut book = self.lock();
        let grant = book.allocate_create(owner, service)?;
        if dry_run {
            book.revert(owner, &grant);
            return Ok(Grant::default());
        }
        Ok(grant)
    }

    /// Allocates for an update of a Service (see `Allocations::allocate_update`).
    pub fn update(&self, owner: &str, old: &Value, service: &mut Value) -> ApiResult<Grant> {
        self.lock().allocate_update(owner, old, service)
    }

    /// Gives back what a write that did not happen reserved.
    pub fn revert(&self, owner: &str, grant: &Grant) {
        if !grant.is_empty() {
            self.lock().revert(owner, grant);
        }
    }

    /// The Service `owner` now is `service` (or is gone).
    pub fn settle(&self, owner: &str, service: Option<&Value>) {
        self.lock().settle(owner, service);
    }

    /// The owner key of a Service.
    pub fn owner(namespace: Option<&str>, name: &str) -> String {
        owner_of(namespace.unwrap_or_default(), name)
    }
}
