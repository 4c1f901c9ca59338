//! The shape of what a pod requests, as Kubernetes' `resourcehelper.PodRequests` computes it:
//! the app containers add up; sidecars (init containers with `restartPolicy: Always`) run
//! beside them and beside the later init steps; the largest init step counts when it is more;
//! the pod overhead adds; a container's missing request defaults to its limit.
//!
//! Generic over how a resource list is read (exact quantities for Kueue's quota, milli-values
//! for the scheduler's fit), so the scheduler and the queue manager share one rule. Knows
//! nothing of nodes or quotas.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::Quantity;

/// A resource amount that requests can be summed in.
pub trait Summand: Clone + Ord {
    /// `self + other`, saturating (or keeping `self`) where the sum does not fit.
    fn plus(&self, other: &Self) -> Self;
}

impl Summand for i128 {
    fn plus(&self, other: &i128) -> i128 {
        self.saturating_add(*other)
    }
}

impl Summand for Quantity {
    fn plus(&self, other: &Quantity) -> Quantity {
        self.checked_add(other).unwrap_or(*self)
    }
}

/// Amounts by resource name.
pub type Tally<V> = BTreeMap<String, V>;

/// A resource list as read by `read` (entries it cannot read left out).
pub type Reader<'r, V> = &'r dyn Fn(Option<&BTreeMap<String, ApiQuantity>>) -> Tally<V>;

fn add<V: Summand>(total: &mut Tally<V>, more: &Tally<V>) {
    for (name, amount) in more {
        let sum = match total.get(name) {
            Some(have) => have.plus(amount),
            None => amount.clone(),
        };
        total.insert(name.clone(), sum);
    }
}

fn max_into<V: Summand>(total: &mut Tally<V>, other: &Tally<V>) {
    for (name, amount) in other {
        if total.get(name).is_none_or(|have| have < amount) {
            total.insert(name.clone(), amount.clone());
        }
    }
}

/// What one container requests: its requests, a missing one defaulting to its limit.
pub fn container_requests<V: Summand>(container: &Container, read: Reader<'_, V>) -> Tally<V> {
    let resources = container.resources.as_ref();
    let mut requests = read(resources.and_then(|r| r.requests.as_ref()));
    for (name, limit) in read(resources.and_then(|r| r.limits.as_ref())) {
        requests.entry(name).or_insert(limit);
    }
    requests
}

/// What a pod with `spec` requests, each resource list read by `read`.
pub fn pod_requests<V: Summand>(spec: &PodSpec, read: Reader<'_, V>) -> Tally<V> {
    let mut total = Tally::new();
    for container in &spec.containers {
        add(&mut total, &container_requests(container, read));
    }
    let mut sidecars = Tally::new();
    let mut init_peak = Tally::new();
    for init in spec.init_containers.iter().flatten() {
        let own = container_requests(init, read);
        let step = if init.restart_policy.as_deref() == Some("Always") {
            // A sidecar keeps running beside the app containers and the later init steps.
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut step = own;
            add(&mut step, &sidecars);
            step
        };
        max_into(&mut init_peak, &step);
    }
    max_into(&mut total, &init_peak);
    add(&mut total, &read(spec.overhead.as_ref()));
    total
}
