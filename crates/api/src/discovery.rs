//! Discovery documents: `/api`, `/apis` (aggregated `apidiscovery.k8s.io/v2` or legacy, by
//! the Accept header), `/api/v1` and `/apis/<group>/<version>` resource lists, and `/version`.
//!
//! Built from the kind catalog; knows nothing about storage.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use tessera_model::kinds::KindInfo;

/// The Kubernetes version whose API Tessera serves.
pub const KUBERNETES_VERSION: &str = "v1.34.1";

/// The Content-Type of aggregated discovery responses.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The form of a discovery document a client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`.
    Aggregated,
    /// The unaggregated `APIVersions` / `APIGroupList` documents.
    Legacy,
}

/// Negotiates the discovery document for an Accept header as kube-apiserver 1.34 does: the
/// media ranges are tried by quality (then in order); `as=APIGroupDiscoveryList` ranges are
/// served only for `g=apidiscovery.k8s.io;v=v2` (v2beta1 is no longer served, so kubectl
/// 1.27–1.29, which ask for it before plain JSON, get the legacy documents); a JSON range
/// without `as=` gets the legacy documents. `None` when nothing acceptable is served (406).
pub fn negotiate(accept: &str) -> Option<DiscoveryFormat> {
    let mut ranges: Vec<(f32, usize, MediaRange<'_>)> = accept
        .split(',')
        .map(str::trim)
        .filter(|range| !range.is_empty())
        .enumerate()
        .map(|(index, range)| {
            let parsed = MediaRange::parse(range);
            (parsed.quality, index, parsed)
        })
        .collect();
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    if ranges.is_empty() {
        return Some(DiscoveryFormat::Legacy);
    }
    ranges
        .into_iter()
        .filter(|(quality, _, _)| *quality > 0.0)
        .find_map(|(_, _, range)| range.discovery_format())
}

/// One media range of an Accept header: `type/subtype;param=value;…`.
struct MediaRange<'a> {
    essence: &'a str,
    quality: f32,
    params: Vec<(&'a str, &'a str)>,
}

impl<'a> MediaRange<'a> {
    fn parse(text: &'a str) -> MediaRange<'a> {
        let mut parts = text.split(';').map(str::trim);
        let essence = parts.next().unwrap_or_default();
        let mut quality = 1.0;
        let mut params = Vec::new();
        for part in parts {
            let Some((name, value)) = part.split_once('=') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim().trim_matches('"'));
            if name == "q" {
                quality = value.parse().unwrap_or(0.0);
            } else {
                params.push((name, value));
            }
        }
        MediaRange {
            essence,
            quality,
            params,
        }
    }

    fn param(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| *value)
    }

    fn discovery_format(&self) -> Option<DiscoveryFormat> {
        if !matches!(self.essence, "application/json" | "application/*" | "*/*") {
            return None;
        }
        match self.param("as") {
            None => Some(DiscoveryFormat::Legacy),
            Some("APIGroupDiscoveryList")
                if self.param("g") == Some("apidiscovery.k8s.io")
                    && self.param("v") == Some("v2") =>
            {
                Some(DiscoveryFormat::Aggregated)
            }
            Some(_) => None,
        }
    }
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": KUBERNETES_VERSION,
        "gitCommit": env!("CARGO_PKG_VERSION"),
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "tessera",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, normalized_arch()),
    })
}

fn normalized_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The kinds a server serves, as discovery lists them.
pub type Kinds = [&'static KindInfo];

fn verbs_of(kind: &KindInfo) -> &'static [&'static str] {
    if kind.create_only {
        &["create"]
    } else if kind.has(tessera_model::Subresource::PendingWorkloads) {
        // Kueue's visibility storage serves its queues only for their subresource.
        &[]
    } else if kind.group == "metrics.k8s.io" {
        // metrics-server's storage is read-only.
        &["get", "list"]
    } else {
        VERBS
    }
}

/// Groups (with their versions, preferred first) in serving order, core first.
fn groups(kinds: &Kinds) -> BTreeMap<&'static str, Vec<&'static str>> {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for kind in kinds {
        let versions = groups.entry(kind.group).or_default();
        if !versions.contains(&kind.version) {
            versions.push(kind.version);
        }
    }
    for versions in groups.values_mut() {
        versions.sort_by(|a, b| crate::crd::version_priority(a, b));
    }
    groups
}

fn kinds_in<'a>(
    kinds: &'a Kinds,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static KindInfo> + 'a {
    kinds
        .iter()
        .copied()
        .filter(move |k| k.group == group && k.version == version)
}

/// Whether a group/version is served.
pub fn serves(kinds: &Kinds, group: &str, version: &str) -> bool {
    kinds_in(kinds, group, version).next().is_some()
}

/// The `serverAddressByClientCIDRs` of legacy discovery: every client reaches the server at
/// its advertised `host:port`.
fn server_addresses(advertised: &str) -> Value {
    json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": advertised}])
}

/// Legacy `/api`, advertising the server at `advertised` (`host:port`).
pub fn legacy_core_versions(advertised: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": server_addresses(advertised),
    })
}

/// Legacy `/apis`; each group carries the server's address as upstream's root handler adds it.
pub fn legacy_groups(kinds: &Kinds, advertised: &str) -> Value {
    let groups: Vec<Value> = groups(kinds)
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                .collect();
            json!({"name": group, "versions": versions, "preferredVersion": versions[0],
                   "serverAddressByClientCIDRs": server_addresses(advertised)})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// Legacy `/apis/<group>`.
pub fn legacy_group(kinds: &Kinds, group: &str) -> Option<Value> {
    let versions = groups(kinds).remove(group)?;
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": group,
                "versions": versions, "preferredVersion": versions[0]}),
    )
}

/// Legacy `/api/v1` or `/apis/<group>/<version>`: an `APIResourceList`.
pub fn resource_list(kinds: &Kinds, group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for kind in kinds_in(kinds, group, version) {
        resources.push(json!({
            "name": kind.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": verbs_of(kind),
            "shortNames": kind.short_names,
            "categories": kind.categories,
            "storageVersionHash": storage_version_hash(kind),
        }));
        for sub in kind.subresources {
            let (sub_group, sub_version, sub_kind) = sub.response_kind(kind);
            let mut entry = json!({
                "name": format!("{}/{}", kind.plural, sub.name()),
                "singularName": "",
                "namespaced": kind.namespaced,
                "kind": sub_kind,
                "verbs": sub.verbs(),
            });
            if sub_group != kind.group || sub_version != kind.version {
                entry["group"] = json!(sub_group);
                entry["version"] = json!(sub_version);
            }
            resources.push(entry);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
           "resources": resources})
}

/// A stable hash of the group/version/kind objects are *stored* as (8 bytes, base64), as
/// upstream publishes it: every served version of a kind shares its storage version's hash,
/// which is how clients (the storage-version migrator, garbage collectors) tell that two
/// versions are one resource.
fn storage_version_hash(kind: &KindInfo) -> String {
    let (group, version, stored_kind) = match &kind.custom {
        Some(custom) => (kind.group, custom.storage_version.as_str(), kind.kind),
        None => crate::resource::Resource::find(kind.group, kind.version, kind.plural)
            .map(crate::convert::storage_of)
            .map_or((kind.group, kind.version, kind.kind), |stored| {
                (stored.group(), stored.info.version, stored.kind())
            }),
    };
    let hash = tessera_model::fnv::fnv64(format!("{group}/{version}/{stored_kind}").as_bytes());
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(hash.to_be_bytes())
}

fn aggregated_group(kinds: &Kinds, group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let resources: Vec<Value> = kinds_in(kinds, group, version)
                .map(|kind| {
                    let subresources: Vec<Value> = kind
                        .subresources
                        .iter()
                        .map(|sub| {
                            let (g, v, k) = sub.response_kind(kind);
                            json!({"subresource": sub.name(),
                                   "responseKind": {"group": g, "version": v, "kind": k},
                                   "verbs": sub.verbs()})
                        })
                        .collect();
                    let mut entry = json!({
                        "resource": kind.plural,
                        "responseKind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
                        "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": kind.singular,
                        "verbs": verbs_of(kind),
                    });
                    if !kind.short_names.is_empty() {
                        entry["shortNames"] = json!(kind.short_names);
                    }
                    if !kind.categories.is_empty() {
                        entry["categories"] = json!(kind.categories);
                    }
                    if !subresources.is_empty() {
                        entry["subresources"] = json!(subresources);
                    }
                    entry
                })
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
}

/// Aggregated `/api` (core only) or `/apis` (every other group).
pub fn aggregated(kinds: &Kinds, core: bool) -> Value {
    let items: Vec<Value> = groups(kinds)
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, versions)| aggregated_group(kinds, group, &versions))
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
           "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Vec<&'static KindInfo> {
        tessera_model::kinds::builtin().iter().collect()
    }

    #[test]
    fn discovery_is_negotiated_by_media_range() {
        use DiscoveryFormat::{Aggregated, Legacy};
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        let cases: &[(&str, Option<DiscoveryFormat>)] = &[
            // kubectl 1.30+ (client-go): v2, then v2beta1, then plain JSON.
            (
                &format!("{v2},{v2beta1},application/json"),
                Some(Aggregated),
            ),
            // kubectl 1.27–1.29: v2beta1 (no longer served), then plain JSON.
            (&format!("{v2beta1},application/json"), Some(Legacy)),
            (v2beta1, None),
            (v2, Some(Aggregated)),
            ("application/json", Some(Legacy)),
            ("", Some(Legacy)),
            ("*/*", Some(Legacy)),
            ("application/yaml", None),
            // Protobuf discovery is not served; the JSON fallback is.
            (
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
                Some(Legacy),
            ),
            // Quality orders the ranges; q=0 refuses one.
            (&format!("application/json;q=0.5,{v2}"), Some(Aggregated)),
            (&format!("{v2};q=0,application/json"), Some(Legacy)),
            // Parameters are not substrings of one another.
            (
                "application/json;g=apidiscovery.k8s.io;v=v2beta2;as=APIGroupDiscoveryList",
                None,
            ),
            (
                "application/json;g=example.com;v=v2;as=APIGroupDiscoveryList",
                None,
            ),
        ];
        for (accept, expected) in cases {
            assert_eq!(negotiate(accept), *expected, "Accept: {accept}");
        }
    }

    #[test]
    fn every_version_of_a_kind_shares_its_storage_versions_hash() {
        let kinds = builtin();
        let hash_of = |group: &str, version: &str, plural: &str| {
            resource_list(&kinds, group, version)["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == plural)
                .unwrap_or_else(|| panic!("{group}/{version} {plural}"))["storageVersionHash"]
                .clone()
        };
        let claims = hash_of("resource.k8s.io", "v1", "resourceclaims");
        assert_eq!(
            hash_of("resource.k8s.io", "v1beta1", "resourceclaims"),
            claims
        );
        assert_eq!(
            hash_of("resource.k8s.io", "v1beta2", "resourceclaims"),
            claims
        );
        assert_ne!(hash_of("resource.k8s.io", "v1", "deviceclasses"), claims);
        let hpa = hash_of("autoscaling", "v2", "horizontalpodautoscalers");
        assert_eq!(
            hash_of("autoscaling", "v1", "horizontalpodautoscalers"),
            hpa
        );
        assert_eq!(
            hash_of("events.k8s.io", "v1", "events"),
            hash_of("", "v1", "events")
        );
    }

    #[test]
    fn legacy_documents_advertise_the_listen_address() {
        let core = legacy_core_versions("10.0.0.5:16443");
        assert_eq!(
            core["serverAddressByClientCIDRs"],
            json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.5:16443"}])
        );
        let groups = legacy_groups(&builtin(), "10.0.0.5:16443");
        let apps = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "apps")
            .unwrap();
        assert_eq!(
            apps["serverAddressByClientCIDRs"][0]["serverAddress"],
            "10.0.0.5:16443"
        );
    }

    #[test]
    fn legacy_core_list_has_pod_subresources_for_drain() {
        let list = resource_list(&builtin(), "", "v1");
        let resources = list["resources"].as_array().unwrap();
        let eviction = resources
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(eviction["kind"], "Eviction");
        assert_eq!(eviction["group"], "policy");
        assert_eq!(eviction["version"], "v1");
        assert!(resources.iter().any(|r| r["name"] == "pods/log"));
        assert!(resources.iter().any(|r| r["name"] == "pods/binding"));
        let pods = resources.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
    }

    #[test]
    fn aggregated_discovery_splits_core_and_groups() {
        let core = aggregated(&builtin(), true);
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        let groups = aggregated(&builtin(), false);
        let names: Vec<_> = groups["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        for wanted in [
            "apps",
            "batch",
            "resource.k8s.io",
            "rbac.authorization.k8s.io",
            "apiextensions.k8s.io",
        ] {
            assert!(
                names.iter().any(|n| n == wanted),
                "{wanted} missing from {names:?}"
            );
        }
    }
}
