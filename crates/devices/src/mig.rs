//! MIG layouts: whether a set of MIG profiles fits on one GPU and where each instance goes,
//! following NVML's placement rules (each instance occupies `size` consecutive memory slices
//! from one of its profile's allowed starts, instances never overlap, compute slices and
//! per-profile instance limits are respected).
//!
//! Pure and deterministic: the same request always gets the same placements (larger
//! instances are placed first, each at its lowest free start). Knows nothing about nodes or
//! how a layout is configured (mig-parted, DRA).

use crate::catalog::{GpuModel, MigProfile};

/// One placed GPU instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The MIG profile.
    pub profile: String,
    /// First memory slice.
    pub start: u8,
    /// Memory slices occupied.
    pub size: u8,
}

/// Why a layout cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The model has no MIG.
    #[error("{model} does not support MIG")]
    NotMigCapable {
        /// The model.
        model: String,
    },
    /// A profile the model does not have.
    #[error("{model} has no MIG profile {profile:?} (it has {known})")]
    UnknownProfile {
        /// The model.
        model: String,
        /// The requested profile.
        profile: String,
        /// The profiles it has, comma-separated.
        known: String,
    },
    /// More instances of one profile than a GPU allows.
    #[error("{model} allows at most {max} instance(s) of {profile}, {requested} requested")]
    TooManyInstances {
        /// The model.
        model: String,
        /// The profile.
        profile: String,
        /// Its limit.
        max: u8,
        /// How many were requested.
        requested: usize,
    },
    /// The instances together do not fit.
    #[error(
        "{layout} does not fit on one {model}: it needs {compute} of {compute_total} compute slices and {memory} of {memory_total} memory slices, and no placement of the instances avoids overlap"
    )]
    DoesNotFit {
        /// The model.
        model: String,
        /// The requested profiles, comma-separated.
        layout: String,
        /// Compute slices requested.
        compute: u32,
        /// Compute slices of the GPU.
        compute_total: u8,
        /// Memory slices requested.
        memory: u32,
        /// Memory slices of the GPU.
        memory_total: u8,
    },
}

/// Places `profiles` (names, repeats allowed) on one GPU of `model`; the placements come
/// back in the order requested.
pub fn plan_layout(model: &GpuModel, profiles: &[&str]) -> Result<Vec<Placement>, LayoutError> {
    let Some(mig) = &model.mig else {
        return Err(LayoutError::NotMigCapable {
            model: model.name.clone(),
        });
    };
    let mut requested: Vec<(usize, &MigProfile)> = Vec::with_capacity(profiles.len());
    for (index, name) in profiles.iter().enumerate() {
        let profile = model
            .mig_profile(name)
            .ok_or_else(|| LayoutError::UnknownProfile {
                model: model.name.clone(),
                profile: (*name).to_string(),
                known: mig
                    .profiles
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        requested.push((index, profile));
    }
    for profile in &mig.profiles {
        let count = profiles
            .iter()
            .filter(|name| **name == profile.name)
            .count();
        if count > usize::from(profile.max_instances) {
            return Err(LayoutError::TooManyInstances {
                model: model.name.clone(),
                profile: profile.name.clone(),
                max: profile.max_instances,
                requested: count,
            });
        }
    }
    let compute: u32 = requested
        .iter()
        .map(|(_, p)| u32::from(p.compute_slices))
        .sum();
    let memory: u32 = requested.iter().map(|(_, p)| u32::from(p.size)).sum();
    let does_not_fit = || LayoutError::DoesNotFit {
        model: model.name.clone(),
        layout: profiles.join(", "),
        compute,
        compute_total: mig.compute_slices,
        memory,
        memory_total: mig.memory_slices,
    };
    if compute > u32::from(mig.compute_slices) || memory > u32::from(mig.memory_slices) {
        return Err(does_not_fit());
    }
    // Larger instances first: they have the fewest starts.
    requested.sort_by_key(|(index, profile)| (std::cmp::Reverse(profile.size), *index));
    let mut starts = vec![0u8; requested.len()];
    if !place(&requested, 0, 0, &mut starts) {
        return Err(does_not_fit());
    }
    let mut placements: Vec<(usize, Placement)> = requested
        .iter()
        .zip(&starts)
        .map(|((index, profile), start)| {
            (
                *index,
                Placement {
                    profile: profile.name.clone(),
                    start: *start,
                    size: profile.size,
                },
            )
        })
        .collect();
    placements.sort_by_key(|(index, _)| *index);
    Ok(placements.into_iter().map(|(_, p)| p).collect())
}

/// Depth-first search over allowed starts; `used` is a bitmask of occupied memory slices.
fn place(requested: &[(usize, &MigProfile)], next: usize, used: u32, starts: &mut [u8]) -> bool {
    let Some((_, profile)) = requested.get(next) else {
        return true;
    };
    let mask = (1u32 << profile.size) - 1;
    for start in &profile.starts {
        let occupied = mask << start;
        if used & occupied == 0 {
            starts[next] = *start;
            if place(requested, next + 1, used | occupied, starts) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn starts(model: &GpuModel, layout: &[&str]) -> Result<Vec<u8>, LayoutError> {
        plan_layout(model, layout).map(|p| p.iter().map(|p| p.start).collect())
    }

    #[test]
    fn layouts_fit_as_nvml_places_them() {
        let catalog = Catalog::built_in().expect("catalog");
        let h100 = catalog.gpu("H100-SXM5-80GB").expect("H100");
        let h200 = catalog.gpu("H200-SXM5-141GB").expect("H200");
        let table: Vec<(&GpuModel, Vec<&str>, Vec<u8>)> = vec![
            (h200, vec!["1g.18gb"; 7], vec![0, 1, 2, 3, 4, 5, 6]),
            // mig-parted's all-balanced layouts.
            (
                h100,
                vec!["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"],
                vec![2, 3, 0, 4],
            ),
            (
                h200,
                vec!["1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"],
                vec![2, 3, 0, 4],
            ),
            (h100, vec!["3g.40gb", "3g.40gb"], vec![0, 4]),
            (h100, vec!["4g.40gb", "3g.40gb"], vec![0, 4]),
            (
                h100,
                vec!["2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"],
                vec![0, 2, 4, 6],
            ),
            (h100, vec!["1g.20gb"; 4], vec![0, 2, 4, 6]),
            (h100, vec!["7g.80gb"], vec![0]),
            (h100, vec![], vec![]),
        ];
        for (model, layout, want) in table {
            assert_eq!(starts(model, &layout), Ok(want), "{layout:?}");
        }
    }

    #[test]
    fn impossible_layouts_say_why() {
        let catalog = Catalog::built_in().expect("catalog");
        let h100 = catalog.gpu("H100-SXM5-80GB").expect("H100");
        let l40s = catalog.gpu("L40S").expect("L40S");
        let table: Vec<(&GpuModel, Vec<&str>, &str)> = vec![
            (
                h100,
                vec!["1g.10gb"; 8],
                "at most 7 instance(s) of 1g.10gb, 8 requested",
            ),
            (
                h100,
                vec!["3g.40gb", "3g.40gb", "1g.10gb"],
                "needs 7 of 7 compute slices and 9 of 8",
            ),
            (
                h100,
                vec!["4g.40gb", "4g.40gb"],
                "at most 1 instance(s) of 4g.40gb",
            ),
            (
                h100,
                vec!["1g.10gb+me", "1g.10gb+me"],
                "at most 1 instance(s) of 1g.10gb+me",
            ),
            (
                h100,
                vec!["1g.20gb", "1g.20gb", "1g.20gb", "1g.20gb", "1g.10gb"],
                "does not fit",
            ),
            (
                h100,
                vec!["3g.40gb", "2g.20gb", "2g.20gb", "1g.10gb"],
                "needs 8 of 7 compute slices",
            ),
            (h100, vec!["1g.18gb"], "has no MIG profile \"1g.18gb\""),
            (l40s, vec!["1g.10gb"], "L40S does not support MIG"),
        ];
        for (model, layout, message) in table {
            match plan_layout(model, &layout) {
                Err(error) => assert!(error.to_string().contains(message), "{layout:?}: {error}"),
                Ok(placements) => panic!("{layout:?} placed as {placements:?}"),
            }
        }
    }

    proptest::proptest! {
        /// Whatever is requested, a layout that is returned is one NVML would accept.
        #[test]
        fn returned_layouts_are_valid(picks in proptest::collection::vec(0usize..7, 0..9)) {
            let catalog = Catalog::built_in().expect("catalog");
            let h100 = catalog.gpu("H100-SXM5-80GB").expect("H100");
            let mig = h100.mig.as_ref().expect("MIG");
            let names: Vec<&str> = picks.iter().map(|i| mig.profiles[*i].name.as_str()).collect();
            if let Ok(placements) = plan_layout(h100, &names) {
                proptest::prop_assert_eq!(placements.len(), names.len());
                let mut used = 0u32;
                let mut compute = 0u32;
                for (placement, name) in placements.iter().zip(&names) {
                    let profile = h100.mig_profile(name).expect("profile");
                    proptest::prop_assert_eq!(&placement.profile, name);
                    proptest::prop_assert!(profile.starts.contains(&placement.start));
                    let occupied = ((1u32 << placement.size) - 1) << placement.start;
                    proptest::prop_assert_eq!(used & occupied, 0, "overlap in {:?}", placements);
                    used |= occupied;
                    compute += u32::from(profile.compute_slices);
                }
                proptest::prop_assert!(compute <= 7);
            }
        }
    }
}
