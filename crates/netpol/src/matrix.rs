//! The reachability matrix of a set of pods for one port: every pair's verdict at once, as
//! bit sets. Each rule's peers are computed once over the pods (namespace selectors once per
//! namespace), each pod's egress row and ingress column are folded from its selecting
//! policies' rules tier by tier, and a pair is allowed when the source's egress row and the
//! destination's ingress column both let it through. Agrees with `Evaluator::verdict` pair
//! by pair; knows nothing of how the matrix is printed.

use std::collections::HashMap;

use tessera_model::selector::matches_typed;

use crate::compile::{Action, Other, Peer, Rule};
use crate::evaluator::{Evaluator, PodId, PolicyId};
use crate::model::{Direction, Labels, PodInfo, Protocol, Tier};

/// Allowed pairs of a list of pods, for one port and protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pods: Vec<PodId>,
    words: usize,
    bits: Vec<u64>,
}

impl Matrix {
    /// The pods, in row and column order.
    pub fn pods(&self) -> &[PodId] {
        &self.pods
    }

    /// Whether the pod at row `from` may connect to the pod at column `to`.
    pub fn allowed(&self, from: usize, to: usize) -> bool {
        self.bits
            .get(from * self.words + to / 64)
            .is_some_and(|w| w >> (to % 64) & 1 == 1)
    }

    /// How many pairs are allowed.
    pub fn count_allowed(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

type Bits = Vec<u64>;

static NO_LABELS: Labels = Labels::new();

struct Builder<'a> {
    evaluator: &'a Evaluator,
    pods: Vec<&'a PodInfo>,
    namespace_labels: Vec<&'a Labels>,
    by_namespace: Vec<(&'a str, Vec<usize>)>,
    words: usize,
    ones: Bits,
    peers: HashMap<(PolicyId, bool, usize), Bits>,
    named_ports: HashMap<(PolicyId, usize), Bits>,
    port: u16,
    protocol: Protocol,
}

impl Evaluator {
    /// The matrix of `pods` (unknown handles are left out) for `port`/`protocol`.
    pub fn matrix(&self, pods: &[PodId], port: u16, protocol: Protocol) -> Matrix {
        let ids: Vec<PodId> = pods
            .iter()
            .copied()
            .filter(|id| self.pod(*id).is_some())
            .collect();
        let infos: Vec<&PodInfo> = ids.iter().filter_map(|id| self.pod(*id)).collect();
        let n = infos.len();
        let words = n.div_ceil(64);
        let mut ones = vec![u64::MAX; words];
        if !n.is_multiple_of(64)
            && let Some(last) = ones.last_mut()
        {
            *last = (1u64 << (n % 64)) - 1;
        }
        let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, pod) in infos.iter().enumerate() {
            groups.entry(pod.namespace.as_str()).or_default().push(i);
        }
        let namespace_labels = infos
            .iter()
            .map(|p| self.labels_of(&p.namespace).unwrap_or(&NO_LABELS))
            .collect();
        let mut builder = Builder {
            evaluator: self,
            pods: infos,
            namespace_labels,
            by_namespace: groups.into_iter().collect(),
            words,
            ones,
            peers: HashMap::new(),
            named_ports: HashMap::new(),
            port,
            protocol,
        };
        let mut bits = Vec::with_capacity(n * words);
        for (i, id) in ids.iter().enumerate() {
            bits.extend(builder.row(i, *id, Direction::Egress));
        }
        for (j, id) in ids.iter().enumerate() {
            if !builder.affected(*id, Direction::Ingress) {
                continue;
            }
            let column = builder.row(j, *id, Direction::Ingress);
            for (w, word) in column.iter().enumerate() {
                let mut denied = !word & builder.ones[w];
                while denied != 0 {
                    let i = w * 64 + denied.trailing_zeros() as usize;
                    denied &= denied - 1;
                    bits[i * words + j / 64] &= !(1u64 << (j % 64));
                }
            }
        }
        Matrix {
            pods: ids,
            words,
            bits,
        }
    }
}

impl Builder<'_> {
    fn affected(&self, id: PodId, direction: Direction) -> bool {
        self.evaluator.selecting(id).iter().any(|p| {
            self.evaluator
                .policy(*p)
                .is_some_and(|p| p.rules(direction).is_some())
        })
    }

    /// The pods the pod at `subject` may reach (egress) or be reached from (ingress).
    fn row(&mut self, subject: usize, id: PodId, direction: Direction) -> Bits {
        let evaluator = self.evaluator;
        let mut allowed = vec![0u64; self.words];
        let mut pending = self.ones.clone();
        let mut passed = vec![0u64; self.words];
        let mut isolated = false;
        let mut current = Tier::Admin;
        for &policy_id in evaluator.selecting(id) {
            let Some(policy) = evaluator.policy(policy_id) else {
                continue;
            };
            let Some(rules) = policy.rules(direction) else {
                continue;
            };
            if policy.tier != current {
                if isolated {
                    pending.fill(0);
                    isolated = false;
                }
                passed.fill(0);
                current = policy.tier;
            }
            for (index, rule) in rules.iter().enumerate() {
                let set = self.rule_set(subject, policy_id, direction, index, rule);
                if policy.tier == Tier::NetworkPolicy {
                    isolated = true;
                    for w in 0..self.words {
                        let m = set[w] & pending[w];
                        allowed[w] |= m;
                        pending[w] &= !m;
                    }
                    continue;
                }
                for w in 0..self.words {
                    let m = set[w] & pending[w] & !passed[w];
                    match rule.action {
                        Action::Allow => {
                            allowed[w] |= m;
                            pending[w] &= !m;
                        }
                        Action::Deny => pending[w] &= !m,
                        Action::Pass => passed[w] |= m,
                    }
                }
            }
            if policy.tier == Tier::NetworkPolicy {
                isolated = true;
            }
        }
        if !isolated {
            for w in 0..self.words {
                allowed[w] |= pending[w];
            }
        }
        allowed
    }

    /// The pods a rule of the policy selecting the pod at `subject` matches, ports included.
    fn rule_set(
        &mut self,
        subject: usize,
        policy: PolicyId,
        direction: Direction,
        index: usize,
        rule: &Rule,
    ) -> Bits {
        let (port, protocol) = (self.port, self.protocol);
        let destination_fixed = direction == Direction::Ingress || !rule.has_named_ports();
        if destination_fixed {
            let destination = (direction == Direction::Ingress).then(|| self.pods[subject]);
            if !rule.ports_match(port, protocol, destination) {
                return vec![0; self.words];
            }
            return self.peer_set(policy, direction, index, rule).clone();
        }
        let ports = self
            .named_ports
            .entry((policy, index))
            .or_insert_with(|| {
                let mut bits = vec![0u64; self.words];
                for (i, pod) in self.pods.iter().enumerate() {
                    if rule.ports_match(port, protocol, Some(pod)) {
                        bits[i / 64] |= 1 << (i % 64);
                    }
                }
                bits
            })
            .clone();
        let peers = self.peer_set(policy, direction, index, rule);
        ports.iter().zip(peers).map(|(a, b)| a & b).collect()
    }

    fn peer_set(
        &mut self,
        policy: PolicyId,
        direction: Direction,
        index: usize,
        rule: &Rule,
    ) -> &Bits {
        let key = (policy, direction == Direction::Ingress, index);
        if !self.peers.contains_key(&key) {
            let bits = self.compute_peers(rule);
            self.peers.insert(key, bits);
        }
        &self.peers[&key]
    }

    fn compute_peers(&self, rule: &Rule) -> Bits {
        let Some(peers) = &rule.peers else {
            return self.ones.clone();
        };
        let mut bits = vec![0u64; self.words];
        for peer in peers {
            match peer {
                Peer::Pods(set) => {
                    for (namespace, positions) in &self.by_namespace {
                        let Some(first) = positions.first() else {
                            continue;
                        };
                        if !set
                            .namespaces
                            .matches(namespace, self.namespace_labels[*first])
                        {
                            continue;
                        }
                        for &i in positions {
                            if matches_typed(&set.pods, &self.pods[i].labels) {
                                bits[i / 64] |= 1 << (i % 64);
                            }
                        }
                    }
                }
                Peer::Everything => return self.ones.clone(),
                Peer::Nothing => {}
                Peer::Block(_) | Peer::Networks(_) => {
                    for (i, pod) in self.pods.iter().enumerate() {
                        if peer.matches(Other::Pod(pod, self.namespace_labels[i])) {
                            bits[i / 64] |= 1 << (i % 64);
                        }
                    }
                }
            }
        }
        bits
    }
}
