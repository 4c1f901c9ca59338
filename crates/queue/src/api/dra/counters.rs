//! Charging partitionable devices in counter units (`pkg/dra/counters.go`): the devices of a
//! driver's complete pools that a request could get, and the largest value among them of the
//! counter a mapping's counter source names (or — Tessera — of the sum of a counter family
//! such as `memorySlice0` … `memorySlice7`), times the request's count. Knows nothing about
//! claims beyond one request.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::json;
use tessera_dra::pools;
use tessera_dra::selector::{DeviceView, Selector, SelectorError};
use tessera_model::quantity::Quantity;

use super::claims::{Cluster, Counted, all_match, compile, error};
use crate::amount::resource_value;
use crate::config::{CounterSource, FieldError, FieldErrorKind};

impl Cluster<'_> {
    /// `processCounterCharge`: the devices of complete pools of the counter's driver that
    /// match its device selector, the request's class and its selectors; the charge is the
    /// largest value of the counter among them, times the request's count.
    pub(super) fn counter_charge(
        &self,
        counted: &Counted<'_>,
        source: &CounterSource,
        claim_path: &str,
    ) -> Result<i64, Vec<FieldError>> {
        let request_path = format!("{claim_path}.devices.requests[{}]", counted.index);
        let request = counted.request;
        let class = self.class_selectors(&request.device_class_name, &request_path)?;
        let own = compile(
            request.selectors.as_ref(),
            &format!("{request_path}.exactly.selectors"),
            "CEL compilation failed",
        )?;
        let scope = Selector::compile(&source.device_selector).map_err(|e| {
            let message = format!("deviceSelector CEL compilation failed: {e}");
            let kind = FieldErrorKind::Invalid(json!(source.device_selector), message);
            vec![error(request_path.clone(), kind)]
        })?;
        let internal = |message: String| {
            vec![error(
                request_path.clone(),
                FieldErrorKind::Internal(message),
            )]
        };
        let mut largest: Option<i64> = None;
        let mut matched = 0i64;
        for (view, consumes) in complete_pool_devices(&self.slices, &source.driver) {
            let verdict = (|| -> Result<bool, SelectorError> {
                Ok(scope.matches("", &view)?
                    && all_match(&class, &view)?
                    && all_match(&own, &view)?)
            })();
            match verdict {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => return Err(internal(format!("CEL evaluation error for device: {e}"))),
            }
            matched += 1;
            if let Some(value) = counter_value(&consumes, &source.name)
                && largest.is_none_or(|l| value > l)
            {
                largest = Some(value);
            }
        }
        if matched < counted.count {
            return Err(internal(format!(
                "insufficient matching devices for counter driver: {matched} device(s) match but {} requested",
                counted.count
            )));
        }
        let Some(largest) = largest else {
            return Err(internal(format!(
                "matched devices have no consumesCounters entry for counter {:?}",
                source.name
            )));
        };
        Ok(largest.saturating_mul(counted.count.max(1)))
    }
}

/// What a device consumes, per counter (the value in whole units, at least 0).
pub(super) type Consumption = BTreeMap<String, i64>;

/// The devices of `driver`'s complete pools (`groupSlicesByPool`: the newest generation of
/// each pool, complete when all its slices are present), with what each consumes.
fn complete_pool_devices(slices: &[ResourceSlice], driver: &str) -> Vec<(DeviceView, Consumption)> {
    let mut pools: BTreeMap<&str, (i64, Vec<&ResourceSlice>)> = BTreeMap::new();
    for slice in slices.iter().filter(|s| s.spec.driver == driver) {
        let pool = &slice.spec.pool;
        let entry = pools
            .entry(pool.name.as_str())
            .or_insert((pool.generation, Vec::new()));
        if pool.generation > entry.0 {
            *entry = (pool.generation, Vec::new());
        }
        if pool.generation == entry.0 {
            entry.1.push(slice);
        }
    }
    pools
        .into_values()
        .filter(|(_, members)| {
            let expected = members
                .first()
                .map_or(0, |s| s.spec.pool.resource_slice_count);
            i64::try_from(members.len()).is_ok_and(|n| n == expected)
        })
        .flat_map(|(_, members)| members)
        .flat_map(|slice| slice.spec.devices.iter().flatten())
        .map(|device| {
            let mut consumes = Consumption::new();
            let entries = device.consumes_counters.iter().flatten();
            for (name, counter) in entries.flat_map(|c| &c.counters) {
                let Ok(value) = Quantity::try_from(&counter.value) else {
                    continue;
                };
                // Negative values are clamped to 0; Kueue reads the largest value of a
                // counter across the device's sets.
                let value = resource_value(name, &value).max(0);
                let known = consumes.entry(name.clone()).or_insert(value);
                *known = (*known).max(value);
            }
            (pools::view(driver, device), consumes)
        })
        .collect()
}

/// What a device consumes of counter `name`: that counter, or — Tessera — the sum of the
/// family `name0`, `name1`, … (a MIG placement's memory slices).
pub(super) fn counter_value(consumes: &Consumption, name: &str) -> Option<i64> {
    if let Some(value) = consumes.get(name) {
        return Some(*value);
    }
    let family: Vec<i64> = consumes
        .iter()
        .filter(|(counter, _)| {
            counter
                .strip_prefix(name)
                .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|(_, value)| *value)
        .collect();
    if family.is_empty() {
        return None;
    }
    Some(family.into_iter().fold(0i64, i64::saturating_add))
}
