//! The `pods/eviction` subresource over the store: reads the pod and its namespace's
//! PodDisruptionBudgets, charges the one budget that selects it in one status transaction
//! (atomic with its `disruptionsAllowed` check), sets the pod's `DisruptionTarget` condition
//! in another, then deletes the pod (a `resourceVersion` precondition moved to the pod the
//! condition wrote, as upstream's `addConditionAndDeletePod` does). A dry run (the query's
//! `dryRun=All` or the Eviction's `deleteOptions.dryRun`) checks all of it and writes nothing.
//! What is decided — whether the budget is consulted, which budget, upstream's 429s, the
//! condition and the preconditions — is `tessera_api::eviction`'s.

use serde_json::Value;
use tessera_api::error::ApiResult;
use tessera_api::eviction::{
    budget_to_charge, checks_budget, delete_options, take_disruption, with_disruption_target,
};
use tessera_api::meta::{self, meta_str};
use tessera_api::resource::Resource;
use tessera_api::write::{Part, WriteOptions};

use crate::objects::{Objects, decode};

/// Evicts a pod, or refuses as its disruption budget demands; `dry_run` (the request's
/// `dryRun=All`) writes nothing.
pub fn evict(
    objects: &Objects,
    pods: Resource,
    namespace: Option<&str>,
    name: &str,
    eviction: &Value,
    dry_run: bool,
) -> ApiResult<()> {
    let namespace = namespace.unwrap_or("default");
    let dry_run = dry_run || tessera_api::eviction::dry_run(eviction);
    let write = WriteOptions {
        dry_run,
        ..WriteOptions::default()
    };
    let pod = objects.get(pods, Some(namespace), name)?;
    let mut options = delete_options(eviction);
    if checks_budget(&pod) {
        check_budget(objects, namespace, name, &pod, &write)?;
    }
    if !dry_run {
        let now = meta::timestamp(objects.now());
        let written =
            objects.update_with(pods, Some(namespace), name, Part::Status, |current| {
                with_disruption_target(current, &options, &now)
            })?;
        if options
            .precondition_resource_version
            .as_deref()
            .is_some_and(|v| !v.is_empty())
        {
            options.precondition_resource_version =
                meta_str(&written.object, "resourceVersion").map(str::to_string);
        }
    }
    objects.delete(pods, Some(namespace), name, &options, dry_run)?;
    Ok(())
}

fn check_budget(
    objects: &Objects,
    namespace: &str,
    pod_name: &str,
    pod: &Value,
    write: &WriteOptions,
) -> ApiResult<()> {
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
    objects
        .update_with_options_pending(
            pdbs,
            Some(namespace),
            &budget_name,
            Part::Status,
            write,
            |current| take_disruption(current, &budget_name, pod_name, &now),
        )?
        .wait()?;
    Ok(())
}
