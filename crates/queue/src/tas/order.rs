//! The orders TAS walks domains in (`sortedDomains`, `sortedDomainsWithLeader`,
//! `findBestFitDomain*`, `compareDomainLevelValues`): BestFit takes the domains with the most
//! slices first and, for the last one, the fitting domain with the fewest; LeastFreeCapacity
//! (unconstrained requests) takes the fullest first. Beyond Kueue, `FitOrdering` can pick,
//! among the domains that fit, the one that leaves the fewest GPUs stranded.
//!
//! Knows nothing about how the counts were computed (see `assign`).

use std::cmp::Ordering;

use crate::tas::assign::{DomainState, Search, use_least_free_capacity};

/// How the best-fitting domain is chosen among those that hold what is left to place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FitOrdering {
    /// Kueue's BestFit: the fitting domain with the smallest count, first in order on ties.
    #[default]
    Kueue,
    /// Beyond Kueue (issue 17, item 2): the fitting domain with the fewest free units of this
    /// resource (e.g. `nvidia.com/gpu`) in it, so the placement fills a domain that is
    /// already fragmented and keeps whole domains free; ties fall back to BestFit.
    LeastFragmentation {
        /// The resource whose free units count as fragments.
        resource: String,
    },
}

impl Search<'_> {
    /// `compareDomainLevelValues`: siblings at the hostname level by hostname, otherwise by
    /// every level value.
    pub(crate) fn compare_level_values(&self, a: usize, b: usize) -> Ordering {
        let (a, b) = (&self.tree.domains[a], &self.tree.domains[b]);
        if self.tree.lowest_level_is_node && a.parent == b.parent {
            return a.level_values.last().cmp(&b.level_values.last());
        }
        a.level_values.cmp(&b.level_values)
    }

    /// `sortedDomains`: BestFit slices descending (LeastFreeCapacity ascending), then pods
    /// ascending, then level values.
    pub(crate) fn sorted_domains(&self, domains: &[usize], unconstrained: bool) -> Vec<usize> {
        self.sorted_by_counts(domains, unconstrained, |state| {
            (0, state.slice_count, state.pod_count)
        })
    }

    /// `sortedDomainsWithLeader`: leaders descending first, then the with-leader counts as
    /// `sorted_domains` orders the plain ones.
    pub(crate) fn sorted_domains_with_leader(
        &self,
        domains: &[usize],
        unconstrained: bool,
    ) -> Vec<usize> {
        self.sorted_by_counts(domains, unconstrained, |state| {
            (
                state.leader_count,
                state.slice_count_with_leader,
                state.pod_count_with_leader,
            )
        })
    }

    /// The order both sorts share over `(leaders, slices, pods)` as `counts` reads them from
    /// a domain: leaders descending, slices descending for BestFit (ascending for
    /// LeastFreeCapacity), pods ascending, then level values.
    fn sorted_by_counts(
        &self,
        domains: &[usize],
        unconstrained: bool,
        counts: impl Fn(&DomainState) -> (i32, i32, i32),
    ) -> Vec<usize> {
        let least_free = use_least_free_capacity(unconstrained);
        let mut sorted = domains.to_vec();
        sorted.sort_by(|&a, &b| {
            let (leaders_a, slices_a, pods_a) = counts(self.state(a));
            let (leaders_b, slices_b, pods_b) = counts(self.state(b));
            let slices = if least_free {
                slices_a.cmp(&slices_b)
            } else {
                slices_b.cmp(&slices_a)
            };
            leaders_b
                .cmp(&leaders_a)
                .then(slices)
                .then(pods_a.cmp(&pods_b))
                .then_with(|| self.compare_level_values(a, b))
        });
        sorted
    }

    /// `findBestFitDomain`: by pods (with a leader when leaders are needed).
    pub(crate) fn find_best_fit_for_pods(
        &self,
        domains: &[usize],
        needed: i32,
        leader_count: i32,
    ) -> usize {
        self.find_best_fit_by(domains, needed, leader_count, |search, domain| {
            let state = search.state(domain);
            if leader_count > 0 {
                state.pod_count_with_leader
            } else {
                state.pod_count
            }
        })
    }

    /// `findBestFitDomainForSlices`: by slices (with a leader when leaders are needed).
    pub(crate) fn find_best_fit_for_slices(
        &self,
        domains: &[usize],
        needed: i32,
        leader_count: i32,
    ) -> usize {
        self.find_best_fit_by(domains, needed, leader_count, |search, domain| {
            let state = search.state(domain);
            if leader_count > 0 {
                state.slice_count_with_leader
            } else {
                state.slice_count
            }
        })
    }

    /// `findBestFitDomainBy`: the first domain with the smallest count that still holds
    /// `needed`, skipping those short of leaders; the first domain when none fits.
    fn find_best_fit_by(
        &self,
        domains: &[usize],
        needed: i32,
        leader_count: i32,
        count: impl Fn(&Self, usize) -> i32,
    ) -> usize {
        let Some(&first) = domains.first() else {
            return 0;
        };
        let fitting = domains.iter().copied().filter(|&domain| {
            self.state(domain).leader_count >= leader_count && count(self, domain) >= needed
        });
        let best = match &self.fit_ordering {
            FitOrdering::Kueue => fitting.min_by_key(|&domain| count(self, domain)),
            FitOrdering::LeastFragmentation { resource } => fitting.min_by_key(|&domain| {
                (
                    self.snapshot.free_in_domain(domain, resource),
                    count(self, domain),
                )
            }),
        };
        best.unwrap_or(first)
    }
}
