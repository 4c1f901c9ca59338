//! Kubelet-side admission of a GPU request on a node, with the Topology Manager's semantics for
//! one device resource: the device manager offers NUMA hints (every NUMA-node set whose free
//! GPUs satisfy the request, *preferred* when the set is as narrow as the request could ever
//! be on this machine), the manager picks the narrowest preferred hint, and the policy decides:
//! `none` ignores topology, `best-effort` admits anyway, `restricted` needs a preferred hint,
//! `single-numa-node` a preferred hint on one NUMA node. Rejections carry upstream's reasons
//! and messages.
//!
//! Pure: the caller says which GPUs are in use. Knows nothing about pods or the API.

use std::collections::BTreeSet;

use tessera_devices::ServerModel;

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// The policy found no acceptable NUMA alignment (pod reason `TopologyAffinityError`).
    #[error("Resources cannot be allocated with Topology locality")]
    TopologyAffinity,
    /// Not enough free devices (pod reason `UnexpectedAdmissionError`).
    #[error(
        "Allocate failed due to requested number of devices unavailable for {resource}. Requested: {requested}, Available: {available}, which is unexpected"
    )]
    Unavailable {
        /// The resource name.
        resource: String,
        /// Devices requested.
        requested: usize,
        /// Devices free.
        available: usize,
    },
}

impl AdmissionError {
    /// The pod status reason the kubelet reports.
    pub fn reason(&self) -> &'static str {
        match self {
            AdmissionError::TopologyAffinity => "TopologyAffinityError",
            AdmissionError::Unavailable { .. } => "UnexpectedAdmissionError",
        }
    }
}

/// A NUMA hint: the NUMA nodes as a bit mask, and whether it is preferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hint {
    mask: u32,
    preferred: bool,
}

/// Admits `count` GPUs of `server` given those `in_use`, under the Topology Manager `policy`;
/// returns the GPU indexes to allocate.
pub fn admit_gpus(
    server: &ServerModel,
    in_use: &BTreeSet<usize>,
    count: usize,
    policy: &str,
    resource: &str,
) -> Result<Vec<usize>, AdmissionError> {
    let free: Vec<usize> = (0..server.gpus.len())
        .filter(|i| !in_use.contains(i))
        .collect();
    if free.len() < count {
        return Err(AdmissionError::Unavailable {
            resource: resource.to_string(),
            requested: count,
            available: free.len(),
        });
    }
    if count == 0 {
        return Ok(Vec::new());
    }
    let numa_of = |gpu: usize| server.gpus[gpu].numa;
    let in_mask = |mask: u32, gpu: usize| mask & (1 << numa_of(gpu)) != 0;
    let nodes = u32::from(server.sockets.clamp(1, 16));
    let masks = 1..(1u32 << nodes);
    // The narrowest NUMA set that could ever hold the request on this machine.
    let narrowest = masks
        .clone()
        .filter(|mask| {
            (0..server.gpus.len())
                .filter(|g| in_mask(*mask, *g))
                .count()
                >= count
        })
        .map(u32::count_ones)
        .min()
        .unwrap_or(nodes);
    let hints: Vec<Hint> = masks
        .filter(|mask| free.iter().filter(|g| in_mask(*mask, **g)).count() >= count)
        .map(|mask| Hint {
            mask,
            preferred: mask.count_ones() == narrowest,
        })
        .collect();
    // The manager's choice: preferred before not, then the narrowest, then the lowest nodes.
    let best = hints
        .iter()
        .min_by_key(|hint| (!hint.preferred, hint.mask.count_ones(), hint.mask))
        .copied();
    let admitted = match (policy, best) {
        ("none", _) => return Ok(free.into_iter().take(count).collect()),
        ("best-effort", Some(hint)) => hint,
        ("restricted", Some(hint)) if hint.preferred => hint,
        ("single-numa-node", Some(hint)) if hint.preferred && hint.mask.count_ones() == 1 => hint,
        _ => return Err(AdmissionError::TopologyAffinity),
    };
    Ok(free
        .into_iter()
        .filter(|g| in_mask(admitted.mask, *g))
        .take(count)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_devices::Catalog;

    /// (policy, GPUs in use, GPUs requested, expected admission).
    type Case = (
        &'static str,
        Vec<usize>,
        usize,
        Result<Vec<usize>, AdmissionError>,
    );

    #[test]
    fn policies_decide_like_the_topology_manager() {
        let catalog = Catalog::built_in().expect("catalog");
        // DGX H100: GPUs 0-3 on NUMA 0, 4-7 on NUMA 1.
        let dgx = catalog.server("dgx-h100").expect("dgx");
        let used = |gpus: &[usize]| gpus.iter().copied().collect::<BTreeSet<usize>>();
        let affinity = Err(AdmissionError::TopologyAffinity);
        let table: Vec<Case> = vec![
            ("single-numa-node", vec![], 4, Ok(vec![0, 1, 2, 3])),
            ("single-numa-node", vec![0], 4, Ok(vec![4, 5, 6, 7])),
            ("single-numa-node", vec![0, 4], 4, affinity.clone()),
            ("single-numa-node", vec![], 8, affinity.clone()),
            // Eight GPUs can never sit on one NUMA node: two nodes is the preferred width.
            ("restricted", vec![], 8, Ok(vec![0, 1, 2, 3, 4, 5, 6, 7])),
            ("restricted", vec![0, 1, 4, 5], 3, affinity.clone()),
            ("best-effort", vec![0, 1, 4, 5], 3, Ok(vec![2, 3, 6])),
            ("best-effort", vec![1, 2, 3], 2, Ok(vec![4, 5])),
            ("none", vec![1, 2, 3], 2, Ok(vec![0, 4])),
            (
                "none",
                vec![0, 1, 2, 3, 4, 5, 6],
                2,
                Err(AdmissionError::Unavailable {
                    resource: "nvidia.com/gpu".into(),
                    requested: 2,
                    available: 1,
                }),
            ),
        ];
        for (policy, in_use, count, want) in table {
            let got = admit_gpus(dgx, &used(&in_use), count, policy, "nvidia.com/gpu");
            assert_eq!(got, want, "{policy} {in_use:?} {count}");
        }
        let error = admit_gpus(dgx, &used(&[]), 9, "none", "nvidia.com/gpu").unwrap_err();
        assert_eq!(error.reason(), "UnexpectedAdmissionError");
        assert_eq!(
            error.to_string(),
            "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 9, Available: 8, which is unexpected"
        );
        assert_eq!(
            AdmissionError::TopologyAffinity.reason(),
            "TopologyAffinityError"
        );
    }
}
