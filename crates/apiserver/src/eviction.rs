//! The `pods/eviction` subresource over the store: reads the pod and its namespace's
//! PodDisruptionBudgets, charges the one budget that selects it in one status transaction
//! (atomic with its `disruptionsAllowed` check), then deletes the pod. What is decided —
//! whether the budget is consulted, which budget, upstream's 429s — is
//! `tessera_api::eviction`'s.

use serde_json::Value;
use tessera_api::error::ApiResult;
use tessera_api::eviction::{budget_to_charge, checks_budget, delete_options, take_disruption};
use tessera_api::meta::{self, meta_str};
use tessera_api::resource::Resource;
use tessera_api::write::Part;

use crate::objects::{Objects, decode};

/// Evicts a pod, or refuses as its disruption budget demands.
pub fn evict(
    objects: &Objects,
    pods: Resource,
    namespace: Option<&str>,
    name: &str,
    eviction: &Value,
) -> ApiResult<()> {
    let namespace = namespace.unwrap_or("default");
    let pod = objects.get(pods, Some(namespace), name)?;
    let options = delete_options(eviction);
    if checks_budget(&pod) {
        check_budget(objects, namespace, name, &pod)?;
    }
    objects.delete(pods, Some(namespace), name, &options, false)?;
    Ok(())
}

fn check_budget(objects: &Objects, namespace: &str, pod_name: &str, pod: &Value) -> ApiResult<()> {
    let Some(pdbs) = Resource::find("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let budgets = objects
        .list(pdbs, Some(namespace))
        .entries
        .iter()
        .map(decode)
        .collect::<ApiResult<Vec<Value>>>()?;
    let Some(budget) = budget_to_charge(budgets, pod)? else {
        return Ok(());
    };
    let budget_name = meta_str(&budget, "name").unwrap_or_default().to_string();
    let now = meta::timestamp(objects.now());
    objects.update_with(
        pdbs,
        Some(namespace),
        &budget_name,
        Part::Status,
        |current| take_disruption(current, &budget_name, pod_name, &now),
    )?;
    Ok(())
}
