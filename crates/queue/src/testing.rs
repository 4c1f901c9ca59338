//! Test builders in the spirit of Kueue's `utiltestingapi` wrappers: ClusterQueue and Cohort
//! specs from (flavor, resource, nominal, borrowingLimit, lendingLimit) strings, where an empty
//! limit is unset, as `MakeFlavorQuotas(..).Resource(name, nominal, borrowing, lending)` reads
//! them. Test-only; knows nothing beyond the spec types.

#![cfg(test)]

use crate::amount::Amount;
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tree::{
    ClusterQueueSpec, CohortSpec, DEFAULT_FAIR_WEIGHT, Quotas, ResourceQuota, Tree, TreeSpec,
};

/// (flavor, resource, nominal, borrowing limit or "", lending limit or "").
pub(crate) type Q = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

pub(crate) fn fr(flavor: &str, resource: &str) -> FlavorResource {
    FlavorResource::new(flavor, resource)
}

pub(crate) fn amounts(entries: &[(&str, &str, i64)]) -> FlavorResourceQuantities {
    entries
        .iter()
        .map(|(flavor, resource, value)| (fr(flavor, resource), Amount::new(*value)))
        .collect()
}

fn quotas(entries: &[Q]) -> Quotas {
    let parse = |text: &str| text.parse().expect("test quantity");
    entries
        .iter()
        .map(|(flavor, resource, nominal, borrowing, lending)| {
            let borrowing = (!borrowing.is_empty()).then(|| parse(borrowing));
            let lending = (!lending.is_empty()).then(|| parse(lending));
            let quota = ResourceQuota::from_quantities(
                resource,
                &parse(nominal),
                borrowing.as_ref(),
                lending.as_ref(),
            );
            (fr(flavor, resource), quota)
        })
        .collect()
}

fn optional(name: &str) -> Option<String> {
    (!name.is_empty()).then(|| name.to_owned())
}

/// A ClusterQueue in `cohort` ("" for none) with weight 1.
pub(crate) fn cluster_queue(name: &str, cohort: &str, entries: &[Q]) -> ClusterQueueSpec {
    ClusterQueueSpec {
        name: name.to_owned(),
        cohort: optional(cohort),
        quotas: quotas(entries),
        fair_weight: DEFAULT_FAIR_WEIGHT,
    }
}

/// A Cohort object under `parent` ("" for a root) with weight 1.
pub(crate) fn cohort(name: &str, parent: &str, entries: &[Q]) -> CohortSpec {
    CohortSpec {
        name: name.to_owned(),
        parent: optional(parent),
        quotas: quotas(entries),
        fair_weight: DEFAULT_FAIR_WEIGHT,
    }
}

pub(crate) fn tree(cohorts: Vec<CohortSpec>, cluster_queues: Vec<ClusterQueueSpec>) -> Tree {
    Tree::build(&TreeSpec {
        cohorts,
        cluster_queues,
    })
    .expect("test tree")
}
