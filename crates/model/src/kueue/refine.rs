//! Schema refinements that stand for kubebuilder's validation markers (`MaxLength`,
//! `MaxItems`, `Enum`, `default`, `XValidation`) on the Kueue types' fields.
//!
//! Each is a `schemars` transform; none knows which type or field it refines.

use schemars::Schema;
use serde_json::{Value, json};

/// A DNS subdomain reference (`ClusterQueueReference`, `CohortReference`, …).
pub(crate) const SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// At most 253 characters of a lowercase DNS subdomain.
pub(crate) fn subdomain(schema: &mut Schema) {
    schema.insert("maxLength".into(), json!(253));
    schema.insert("pattern".into(), json!(SUBDOMAIN_PATTERN));
}

/// At most `N` characters.
pub(crate) fn max_length<const N: usize>(schema: &mut Schema) {
    schema.insert("maxLength".into(), json!(N));
}

/// At least 1 and at most `N` characters.
pub(crate) fn min_max_length<const MIN: usize, const N: usize>(schema: &mut Schema) {
    schema.insert("minLength".into(), json!(MIN));
    schema.insert("maxLength".into(), json!(N));
}

/// At most `N` items.
pub(crate) fn max_items<const N: usize>(schema: &mut Schema) {
    schema.insert("maxItems".into(), json!(N));
}

/// Between `MIN` and `N` items.
pub(crate) fn min_max_items<const MIN: usize, const N: usize>(schema: &mut Schema) {
    schema.insert("minItems".into(), json!(MIN));
    schema.insert("maxItems".into(), json!(N));
}

/// At least `MIN` (an integer).
pub(crate) fn minimum<const MIN: i64>(schema: &mut Schema) {
    schema.insert("minimum".into(), json!(MIN));
}

/// One of the listed strings.
pub(crate) fn enum_of(schema: &mut Schema, values: &[&str]) {
    schema.insert("enum".into(), json!(values));
}

/// The value the server fills in when the field is absent.
pub(crate) fn default_value(schema: &mut Schema, value: Value) {
    schema.insert("default".into(), value);
}

/// Defaults to `{}`, so the object's own field defaults apply.
pub(crate) fn default_empty_object(schema: &mut Schema) {
    default_value(schema, json!({}));
}

/// Defaults to `1` (fair-sharing weights).
pub(crate) fn default_one(schema: &mut Schema) {
    default_value(schema, json!(1));
}

/// Appends CEL rules (`x-kubernetes-validations`) with their messages.
pub(crate) fn cel(schema: &mut Schema, rules: &[(&str, &str)]) {
    let object = schema.ensure_object();
    let list = object
        .entry("x-kubernetes-validations")
        .or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        list.extend(
            rules
                .iter()
                .map(|(rule, message)| json!({"rule": rule, "message": message})),
        );
    }
}

/// A DNS label of at most 63 characters (PodSet names).
pub(crate) fn dns_label(schema: &mut Schema) {
    schema.insert("maxLength".into(), json!(63));
    schema.insert("pattern".into(), json!("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"));
}

/// A list merged by the `name` of its items.
pub(crate) fn map_by_name(schema: &mut Schema) {
    schema.insert("x-kubernetes-list-map-keys".into(), json!(["name"]));
    schema.insert("x-kubernetes-list-type".into(), json!("map"));
}

/// A list of unique items.
pub(crate) fn set(schema: &mut Schema) {
    schema.insert("x-kubernetes-list-type".into(), json!("set"));
}

/// Applies a refinement to the items of a list.
pub(crate) fn items(schema: &mut Schema, refine: fn(&mut Schema)) {
    if let Some(items) = schema.get("items").cloned()
        && let Ok(mut items) = Schema::try_from(items)
    {
        refine(&mut items);
        schema.insert("items".into(), items.to_value());
    }
}

/// A list replaced as a whole by merges.
pub(crate) fn atomic(schema: &mut Schema) {
    schema.insert("x-kubernetes-list-type".into(), json!("atomic"));
}
