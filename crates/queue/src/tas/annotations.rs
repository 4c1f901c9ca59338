//! A PodSet's topology request read from its pod template's annotations as Kueue's job
//! framework builds it (`jobframework/tas.go`, `podSetTopologyRequestBuilder.Build`): required,
//! else preferred, else unconstrained; the slice layer (`podset-slice-required-topology` with
//! `podset-slice-size`) or the multi-layer constraints (a JSON list of 1–3 `{topology, size}`);
//! the PodSet group only with a required or preferred level.
//!
//! Knows nothing about the flavors or nodes; `None` means the PodSet does not ask for TAS
//! (`IsExplicitlyRequestingTAS` is false).

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_model::kueue::topology::{
    PODSET_GROUP_NAME_ANNOTATION, PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
    PODSET_REQUIRED_TOPOLOGY_ANNOTATION, PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    PODSET_SLICE_SIZE_ANNOTATION, PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
};

use crate::tas::request::{SliceConstraint, TopologyRequest};

/// `kueue.x-k8s.io/podset-slice-required-topology-constraints`.
pub const PODSET_SLICE_CONSTRAINTS_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";

/// A topology request with the PodSet group it names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnotatedTopology {
    /// The request.
    pub request: TopologyRequest,
    /// `kueue.x-k8s.io/podset-group-name` (kept only with a required or preferred level).
    pub group: Option<String>,
}

#[derive(Deserialize)]
struct Layer {
    topology: String,
    size: i32,
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "strconv.ParseBool: parsing \"{text}\": invalid syntax"
        )),
    }
}

/// Go's `strconv.ParseInt(text, 10, 32)`.
fn parse_int32(text: &str) -> Result<i32, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseInt: parsing \"{text}\": invalid syntax"
        ));
    }
    text.parse::<i32>()
        .map_err(|_| format!("strconv.ParseInt: parsing \"{text}\": value out of range"))
}

/// The PodSet's topology request from `annotations`, or why the annotations are invalid.
pub fn topology_from_annotations(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<AnnotatedTopology>, String> {
    let get = |key: &str| annotations.get(key).map(String::as_str);
    let required = get(PODSET_REQUIRED_TOPOLOGY_ANNOTATION);
    let preferred = get(PODSET_PREFERRED_TOPOLOGY_ANNOTATION);
    let slice_topology = get(PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION);
    let slice_size = get(PODSET_SLICE_SIZE_ANNOTATION);
    let constraints = get(PODSET_SLICE_CONSTRAINTS_ANNOTATION);
    let mut request = TopologyRequest::default();
    if let Some(level) = required {
        request.required = Some(level.to_owned());
    } else if let Some(level) = preferred {
        request.preferred = Some(level.to_owned());
    } else if let Some(value) = get(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION) {
        request.unconstrained = parse_bool(value)?;
    } else if !((slice_topology.is_some() && slice_size.is_some()) || constraints.is_some()) {
        return Ok(None);
    }
    if let Some(json) = constraints {
        let layers: Vec<Layer> = serde_json::from_str(json).map_err(|error| {
            format!("failed to parse multi-layer topology constraints annotation: {error}")
        })?;
        if layers.is_empty() || layers.len() > 3 {
            return Err(format!(
                "topology constraints must contain between 1 and 3 entries: got {}",
                layers.len()
            ));
        }
        request.slices = layers
            .into_iter()
            .map(|layer| SliceConstraint {
                topology: layer.topology,
                size: layer.size,
            })
            .collect();
    } else if let (Some(topology), Some(size)) = (slice_topology, slice_size) {
        request = request.with_slice(topology, Some(parse_int32(size)?));
    }
    let group = (required.is_some() || preferred.is_some())
        .then(|| get(PODSET_GROUP_NAME_ANNOTATION).map(str::to_owned))
        .flatten();
    // An unconstrained annotation set to false still asks for TAS explicitly in Kueue
    // (`Unconstrained != nil`); the level is then missing, which the search reports.
    Ok(Some(AnnotatedTopology { request, group }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn annotations_read_as_kueues_builder() {
        const RACK: &str = "cloud.com/rack";
        let slice = |topology: &str, size: i32| SliceConstraint {
            topology: topology.to_owned(),
            size,
        };
        let request = |required: Option<&str>,
                       preferred: Option<&str>,
                       unconstrained: bool,
                       slices: Vec<SliceConstraint>| TopologyRequest {
            required: required.map(str::to_owned),
            preferred: preferred.map(str::to_owned),
            unconstrained,
            slices,
        };
        // (case, annotations, want)
        type Want = Result<Option<AnnotatedTopology>, String>;
        type Case = (&'static str, Vec<(&'static str, &'static str)>, Want);
        let cases: Vec<Case> = vec![
            ("no annotations", vec![], Ok(None)),
            (
                "required wins over preferred; the group is kept",
                vec![
                    (PODSET_REQUIRED_TOPOLOGY_ANNOTATION, RACK),
                    (PODSET_PREFERRED_TOPOLOGY_ANNOTATION, "block"),
                    (PODSET_GROUP_NAME_ANNOTATION, "g"),
                ],
                Ok(Some(AnnotatedTopology {
                    request: request(Some(RACK), None, false, vec![]),
                    group: Some("g".into()),
                })),
            ),
            (
                "unconstrained drops the group",
                vec![
                    (PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, "True"),
                    (PODSET_GROUP_NAME_ANNOTATION, "g"),
                ],
                Ok(Some(AnnotatedTopology {
                    request: request(None, None, true, vec![]),
                    group: None,
                })),
            ),
            (
                "unconstrained must be a Go bool",
                vec![(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, "yes")],
                Err("strconv.ParseBool: parsing \"yes\": invalid syntax".into()),
            ),
            (
                "slices alone",
                vec![
                    (PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, RACK),
                    (PODSET_SLICE_SIZE_ANNOTATION, "4"),
                ],
                Ok(Some(AnnotatedTopology {
                    request: request(None, None, false, vec![slice(RACK, 4)]),
                    group: None,
                })),
            ),
            (
                "a slice topology without a size is no request",
                vec![(PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, RACK)],
                Ok(None),
            ),
            (
                "a slice size must be an int32",
                vec![
                    (PODSET_PREFERRED_TOPOLOGY_ANNOTATION, "block"),
                    (PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, RACK),
                    (PODSET_SLICE_SIZE_ANNOTATION, "4294967296"),
                ],
                Err("strconv.ParseInt: parsing \"4294967296\": value out of range".into()),
            ),
            (
                "multi-layer constraints win over the slice pair",
                vec![
                    (PODSET_REQUIRED_TOPOLOGY_ANNOTATION, "dc"),
                    (PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, RACK),
                    (PODSET_SLICE_SIZE_ANNOTATION, "4"),
                    (
                        PODSET_SLICE_CONSTRAINTS_ANNOTATION,
                        r#"[{"topology":"zone","size":48},{"topology":"cloud.com/rack","size":16}]"#,
                    ),
                ],
                Ok(Some(AnnotatedTopology {
                    request: request(
                        Some("dc"),
                        None,
                        false,
                        vec![slice("zone", 48), slice(RACK, 16)],
                    ),
                    group: None,
                })),
            ),
            (
                "at most three layers",
                vec![(
                    PODSET_SLICE_CONSTRAINTS_ANNOTATION,
                    r#"[{"topology":"a","size":8},{"topology":"b","size":4},{"topology":"c","size":2},{"topology":"d","size":1}]"#,
                )],
                Err("topology constraints must contain between 1 and 3 entries: got 4".into()),
            ),
        ];
        for (name, pairs, want) in cases {
            assert_eq!(
                topology_from_annotations(&annotations(&pairs)),
                want,
                "{name}"
            );
        }
    }
}
