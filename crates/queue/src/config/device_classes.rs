//! `resources.deviceClassMappings` of Kueue's Configuration (`DeviceClassMapping`,
//! `DeviceClassSourceConfig`): which DeviceClasses a quota resource counts, and — `v1beta2`
//! only — counter sources that count partitionable devices in a driver counter's units. Read,
//! then checked as `validateDeviceClassMappings` checks them, with upstream's field paths and
//! messages.
//!
//! One deliberate difference: a counter source's `name` may also be a C identifier
//! (`computeSlices`, `memorySlice`), because Tessera's DRA driver names its counters as
//! NVIDIA's driver does, in camelCase, which Kueue's DNS-label check would refuse. Capacity
//! sources need a feature gate that is off by default (`KueueDRAIntegrationConsumableCapacity`)
//! and are refused with Kueue's message. Knows nothing about claims or Workloads.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};

use super::{FieldErrorKind, Reader, Version};

/// One `resources.deviceClassMappings` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceClassMapping {
    /// `name`: the quota resource the DeviceClasses count as.
    pub name: String,
    /// `deviceClassNames`.
    pub device_class_names: Vec<String>,
    /// `sources[].counter`: count in counter units instead of devices.
    pub counters: Vec<CounterSource>,
}

/// `sources[].counter` (`DeviceClassCounterSource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSource {
    /// `name`: the counter in the devices' `consumesCounters` (or, Tessera, the stem of a
    /// family of counters `<name>0`, `<name>1`, …).
    pub name: String,
    /// `driver`: the ResourceSlices' driver.
    pub driver: String,
    /// `deviceSelector.cel.expression`: the devices that count.
    pub device_selector: String,
}

/// At most this many mappings (`+kubebuilder:validation:MaxItems`, checked again in Go).
const MAX_MAPPINGS: usize = 16;
/// At most this many DeviceClasses per mapping.
const MAX_DEVICE_CLASSES: usize = 8;
/// `resourcev1.DriverNameMaxLength`.
const MAX_DRIVER_LENGTH: usize = 63;
/// Where the mappings are.
const PATH: &str = "resources.deviceClassMappings";

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawResources {
    exclude_resource_prefixes: Option<Value>,
    transformations: Option<Value>,
    quota_check_strategy: Option<Value>,
    device_class_mappings: Option<Vec<RawMapping>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawMapping {
    #[serde(default)]
    name: String,
    #[serde(default)]
    device_class_names: Vec<String>,
    sources: Option<Vec<RawSource>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSource {
    counter: Option<RawCounter>,
    capacity: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCounter {
    #[serde(default)]
    name: String,
    #[serde(default)]
    driver: String,
    device_selector: Option<RawSelector>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSelector {
    cel: Option<RawCel>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCel {
    #[serde(default)]
    expression: String,
}

/// `resources`: the mappings, and the names of the fields Tessera accepts and ignores
/// (`resources.transformations`, …). `v1beta1` has neither `sources` nor
/// `quotaCheckStrategy`.
pub(super) fn read_resources(
    reader: &mut Reader<'_>,
    version: Version,
    fields: &serde_json::Map<String, Value>,
) -> (Vec<DeviceClassMapping>, Vec<String>) {
    let value = fields.get("resources");
    if version == Version::V1beta1 {
        refuse_v1beta2_fields(reader, value);
    }
    let raw: RawResources = reader.section("resources", value);
    let ignored = [
        (
            "resources.excludeResourcePrefixes",
            &raw.exclude_resource_prefixes,
        ),
        ("resources.transformations", &raw.transformations),
        ("resources.quotaCheckStrategy", &raw.quota_check_strategy),
    ]
    .into_iter()
    .filter(|(_, value)| value.is_some())
    .map(|(name, _)| name.to_owned())
    .collect();
    let mappings = raw.device_class_mappings.unwrap_or_default();
    let mappings = validate(reader, mappings);
    (mappings, ignored)
}

/// Strict decoding of `v1beta1`, whose `Resources` and `DeviceClassMapping` lack these.
fn refuse_v1beta2_fields(reader: &mut Reader<'_>, resources: Option<&Value>) {
    let Some(resources) = resources else {
        return;
    };
    if resources.get("quotaCheckStrategy").is_some() {
        reader.fail("resources.quotaCheckStrategy", FieldErrorKind::Unknown);
    }
    let mappings = resources
        .get("deviceClassMappings")
        .and_then(Value::as_array);
    for (index, mapping) in mappings.into_iter().flatten().enumerate() {
        if mapping.get("sources").is_some() {
            reader.fail(&format!("{PATH}[{index}].sources"), FieldErrorKind::Unknown);
        }
    }
}

/// `validateDeviceClassMappings`, reading the mappings as it goes; the mappings come back
/// whatever the errors (the caller refuses the file when there are any).
fn validate(reader: &mut Reader<'_>, raw: Vec<RawMapping>) -> Vec<DeviceClassMapping> {
    if raw.len() > MAX_MAPPINGS {
        let kind = FieldErrorKind::TooMany {
            actual: raw.len(),
            max: MAX_MAPPINGS,
        };
        reader.fail(PATH, kind);
    }
    let mut names = BTreeSet::new();
    // Per DeviceClass: the resource it maps to first, and the counters mapping it.
    let mut mapped: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    let mut mappings = Vec::new();
    for (index, mapping) in raw.into_iter().enumerate() {
        let path = format!("{PATH}[{index}]");
        let name_path = format!("{path}.name");
        check_resource_name(reader, &name_path, &mapping.name);
        if !names.insert(mapping.name.clone()) {
            reader.fail(&name_path, FieldErrorKind::Duplicate(json!(mapping.name)));
        }
        let classes_path = format!("{path}.deviceClassNames");
        if mapping.device_class_names.is_empty() {
            let detail = "at least one device class name is required".to_owned();
            reader.fail(&classes_path, FieldErrorKind::RequiredWith(detail));
        }
        if mapping.device_class_names.len() > MAX_DEVICE_CLASSES {
            let kind = FieldErrorKind::TooMany {
                actual: mapping.device_class_names.len(),
                max: MAX_DEVICE_CLASSES,
            };
            reader.fail(&classes_path, kind);
        }
        // `counterNameForMapping`: the first source's counter, if it is one.
        let counter_name = mapping
            .sources
            .iter()
            .flatten()
            .next()
            .and_then(|s| s.counter.as_ref())
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let mut seen = BTreeSet::new();
        for (class_index, class) in mapping.device_class_names.iter().enumerate() {
            let class_path = format!("{classes_path}[{class_index}]");
            check_resource_name(reader, &class_path, class);
            if !seen.insert(class) {
                reader.fail(&class_path, FieldErrorKind::Duplicate(json!(class)));
            }
            let invalid = |message: String| FieldErrorKind::Invalid(json!(class), message);
            match mapped.get_mut(class) {
                Some((resource, _)) if *resource == mapping.name => {}
                Some((resource, counters)) => {
                    // One DeviceClass in several mappings only when each counts a different
                    // counter.
                    if counter_name.is_empty() || counters.is_empty() {
                        let message = format!("device class already mapped to resource {resource}");
                        reader.fail(&class_path, invalid(message));
                    } else if counters.contains(&counter_name) {
                        let message = format!(
                            "device class already has a counter source for counter {counter_name:?}"
                        );
                        reader.fail(&class_path, invalid(message));
                    } else {
                        counters.insert(counter_name.clone());
                    }
                }
                None => {
                    let counters = BTreeSet::from_iter(
                        (!counter_name.is_empty()).then(|| counter_name.clone()),
                    );
                    mapped.insert(class.clone(), (mapping.name.clone(), counters));
                }
            }
        }
        let counters = match mapping.sources {
            Some(sources) if !sources.is_empty() => validate_sources(reader, &path, sources),
            _ => Vec::new(),
        };
        mappings.push(DeviceClassMapping {
            name: mapping.name,
            device_class_names: mapping.device_class_names,
            counters,
        });
    }
    mappings
}

/// A mapping's `sources`: exactly one kind per entry, counters checked, capacity refused
/// (its feature gate is off), and the two kinds never mixed.
fn validate_sources(
    reader: &mut Reader<'_>,
    mapping_path: &str,
    sources: Vec<RawSource>,
) -> Vec<CounterSource> {
    let sources_path = format!("{mapping_path}.sources");
    let count = sources.len();
    let mut counters = Vec::new();
    let mut has_capacity = false;
    for (index, source) in sources.into_iter().enumerate() {
        let path = format!("{sources_path}[{index}]");
        const ONE: &str = "exactly one source type must be set per entry";
        match (source.counter, source.capacity) {
            (None, None) => reader.fail(&path, FieldErrorKind::RequiredWith(ONE.into())),
            (Some(_), Some(_)) => {
                let kind = FieldErrorKind::Invalid(json!("counter+capacity"), ONE.into());
                reader.fail(&path, kind);
            }
            (None, Some(_)) => {
                has_capacity = true;
                let message =
                    "capacity sources require KueueDRAIntegrationConsumableCapacity to be enabled";
                let kind = FieldErrorKind::Invalid(json!(true), message.into());
                reader.fail(&format!("{path}.capacity"), kind);
            }
            (Some(counter), None) => {
                let path = format!("{path}.counter");
                counters.push(validate_counter(reader, &path, counter));
            }
        }
    }
    if !counters.is_empty() && has_capacity {
        let message = "cannot mix counter and capacity sources in the same mapping";
        let kind = FieldErrorKind::Invalid(json!(count), message.into());
        reader.fail(&sources_path, kind);
    }
    counters
}

/// A counter source: its name, driver and device selector (`validateDeviceClassSource`).
fn validate_counter(reader: &mut Reader<'_>, path: &str, counter: RawCounter) -> CounterSource {
    let name_path = format!("{path}.name");
    if counter.name.is_empty() {
        reader.fail(&name_path, FieldErrorKind::RequiredWith(String::new()));
    } else if let Some(problems) = dns1123_label(&counter.name)
        && !is_c_identifier(&counter.name)
    {
        let kind = FieldErrorKind::Invalid(json!(counter.name), problems.join(","));
        reader.fail(&name_path, kind);
    }
    let driver_path = format!("{path}.driver");
    let driver = &counter.driver;
    if driver.is_empty() {
        reader.fail(&driver_path, FieldErrorKind::RequiredWith(String::new()));
    } else if driver.len() > MAX_DRIVER_LENGTH {
        let message = format!("must not exceed {MAX_DRIVER_LENGTH} characters");
        reader.fail(
            &driver_path,
            FieldErrorKind::Invalid(json!(driver), message),
        );
    } else if let Some(problems) = dns1123_subdomain(driver) {
        let kind = FieldErrorKind::Invalid(json!(driver), problems.join(","));
        reader.fail(&driver_path, kind);
    }
    let selector_path = format!("{path}.deviceSelector.cel.expression");
    let expression = counter
        .device_selector
        .and_then(|s| s.cel)
        .map(|c| c.expression)
        .unwrap_or_default();
    if expression.is_empty() {
        reader.fail(&selector_path, FieldErrorKind::RequiredWith(String::new()));
    } else if let Err(error) = tessera_dra::selector::Selector::compile(&expression) {
        let message = format!("CEL compilation failed: {error}");
        let kind = FieldErrorKind::Invalid(json!(expression), message);
        reader.fail(&selector_path, kind);
    }
    CounterSource {
        name: counter.name,
        driver: counter.driver,
        device_selector: expression,
    }
}

/// A mapping's name or a DeviceClass name: a label key (`content.IsLabelKey`), at most 253
/// characters.
fn check_resource_name(reader: &mut Reader<'_>, path: &str, name: &str) {
    if let Some(problems) = qualified_name(name) {
        let kind = FieldErrorKind::Invalid(json!(name), problems.join("; "));
        reader.fail(path, kind);
    }
    if name.len() > 253 {
        let kind = FieldErrorKind::Invalid(json!(name), "must not exceed 253 characters".into());
        reader.fail(path, kind);
    }
}

const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn is_label(text: &str) -> bool {
    let edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    text.starts_with(edge) && text.ends_with(edge) && text.chars().all(|c| edge(c) || c == '-')
}

/// `IsDNS1123Label`'s problems, `None` when it is one.
fn dns1123_label(text: &str) -> Option<Vec<String>> {
    let mut problems = Vec::new();
    if text.len() > 63 {
        problems.push("must be no more than 63 bytes".to_owned());
    }
    if !is_label(text) {
        problems.push(DNS1123_LABEL.to_owned());
    }
    (!problems.is_empty()).then_some(problems)
}

/// `IsDNS1123Subdomain`'s problems, `None` when it is one.
fn dns1123_subdomain(text: &str) -> Option<Vec<String>> {
    let mut problems = Vec::new();
    if text.len() > 253 {
        problems.push("must be no more than 253 bytes".to_owned());
    }
    if !text.split('.').all(is_label) {
        problems.push(DNS1123_SUBDOMAIN.to_owned());
    }
    (!problems.is_empty()).then_some(problems)
}

/// `IsQualifiedName`'s problems, `None` when it is one.
fn qualified_name(text: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = text.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => {
            return Some(vec![format!(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]);
        }
    };
    let mut problems = Vec::new();
    match prefix {
        Some("") => problems.push("prefix part must be non-empty".to_owned()),
        Some(prefix) => {
            for problem in dns1123_subdomain(prefix).into_iter().flatten() {
                problems.push(format!("prefix part {problem}"));
            }
        }
        None => {}
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 bytes".to_owned());
    }
    let well_formed = name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    if !name.is_empty() && !well_formed {
        problems.push(QUALIFIED_NAME.to_owned());
    }
    (!problems.is_empty()).then_some(problems)
}

/// A C identifier (`[A-Za-z_][A-Za-z0-9_]*`), at most 63 bytes.
fn is_c_identifier(text: &str) -> bool {
    text.len() <= 63
        && text.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
