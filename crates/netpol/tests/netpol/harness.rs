//! Runs a table file: builds the layout's pods, applies each step's changes to one
//! incremental evaluator, and checks every probe's full truth table (and pair checks)
//! against the evaluator's matrix, its per-pair verdicts and an evaluator built from scratch.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;
use serde_json::Value;
use tessera_netpol::model::{Labels, NamedPort};
use tessera_netpol::table::truth_table;
use tessera_netpol::{Endpoint, Evaluator, Objects, PodInfo, PolicyKind, PolicyRef, Protocol};

#[derive(Deserialize)]
struct File {
    layout: Layout,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Layout {
    namespaces: Vec<NamespaceDef>,
    ports: Vec<PortDef>,
    pods: Vec<PodDef>,
}

#[derive(Deserialize, Clone)]
struct NamespaceDef {
    name: String,
    #[serde(default)]
    labels: Labels,
}

#[derive(Deserialize)]
struct PortDef {
    name: String,
    port: u16,
    protocol: String,
}

#[derive(Deserialize)]
struct PodDef {
    name: String,
    #[serde(default)]
    labels: Labels,
    ips: Vec<String>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    pods: Option<Vec<String>>,
    /// Per IP family, the values of `{key}` placeholders in the applied objects; the case
    /// runs once per family with the pods of that family's addresses only.
    families: Option<BTreeMap<String, BTreeMap<String, String>>>,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    #[serde(default)]
    apply: Vec<Value>,
    #[serde(default)]
    delete: Vec<String>,
    label_namespace: Option<NamespaceDef>,
    label_pod: Option<PodLabels>,
    /// Exchanges two rules of a stored policy's direction.
    #[serde(default)]
    swap: Vec<RuleEdit>,
    /// Changes one rule's action.
    #[serde(default)]
    set_action: Vec<RuleEdit>,
    #[serde(default)]
    probes: Vec<Probe>,
    /// Single pairs: [from, to, port, protocol, allowed].
    #[serde(default)]
    checks: Vec<(String, String, u16, String, bool)>,
}

#[derive(Deserialize)]
struct RuleEdit {
    /// `Kind/name` or `namespace/name` (a NetworkPolicy), as `delete` names it.
    policy: String,
    direction: String,
    #[serde(default)]
    rules: Vec<usize>,
    #[serde(default)]
    rule: usize,
    #[serde(default)]
    action: String,
}

#[derive(Deserialize)]
struct PodLabels {
    pod: String,
    labels: Labels,
}

#[derive(Deserialize)]
struct Probe {
    port: u16,
    protocol: String,
    expect: Vec<(String, String, bool)>,
}

fn protocol(text: &str) -> Protocol {
    text.parse().unwrap_or_else(|e| panic!("{e}"))
}

/// Whether an expectation's end (`*`, `x`, `x/a`) names a pod.
fn selects(end: &str, pod: &str) -> bool {
    end == "*" || end == pod || pod.split_once('/').is_some_and(|(ns, _)| ns == end)
}

fn substitute(value: &mut Value, vars: &BTreeMap<String, String>) {
    match value {
        Value::String(s) => {
            for (key, replacement) in vars {
                *s = s.replace(&format!("{{{key}}}"), replacement);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| substitute(v, vars)),
        Value::Object(map) => map.values_mut().for_each(|v| substitute(v, vars)),
        _ => {}
    }
}

fn family_matches(ip: &IpAddr, family: &str) -> bool {
    match family {
        "ipv4" => ip.is_ipv4(),
        "ipv6" => ip.is_ipv6(),
        _ => true,
    }
}

pub fn run_file(name: &str) {
    let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let file: File = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut failures = Vec::new();
    let mut probes = 0;
    for case in &file.cases {
        let families: Vec<(String, BTreeMap<String, String>)> = match &case.families {
            Some(f) => f.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            None => vec![("dual-stack".to_string(), BTreeMap::new())],
        };
        for (family, vars) in families {
            probes += run_case(&file.layout, case, &family, &vars, &mut failures);
        }
    }
    assert!(probes > 0, "{name}: no probes ran");
    assert!(
        failures.is_empty(),
        "{name}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn run_case(
    layout: &Layout,
    case: &Case,
    family: &str,
    vars: &BTreeMap<String, String>,
    failures: &mut Vec<String>,
) -> usize {
    let ports: Vec<NamedPort> = layout
        .ports
        .iter()
        .map(|p| NamedPort {
            name: p.name.clone(),
            port: p.port,
            protocol: protocol(&p.protocol),
        })
        .collect();
    let mut pods: Vec<PodInfo> = layout
        .pods
        .iter()
        .filter(|p| {
            case.pods
                .as_ref()
                .is_none_or(|names| names.contains(&p.name))
        })
        .map(|p| {
            let (namespace, name) = p.name.split_once('/').expect("pod names are ns/name");
            PodInfo {
                namespace: namespace.into(),
                name: name.into(),
                labels: p.labels.clone(),
                ips: p
                    .ips
                    .iter()
                    .map(|ip| ip.parse().expect("an IP"))
                    .filter(|ip| family_matches(ip, family))
                    .collect(),
                ports: ports.clone(),
            }
        })
        .collect();
    let mut namespaces: Vec<NamespaceDef> = layout.namespaces.clone();
    let mut policies: BTreeMap<PolicyRef, tessera_netpol::Policy> = BTreeMap::new();
    let mut raw: BTreeMap<String, Value> = BTreeMap::new();
    let mut evaluator = Evaluator::new();
    for ns in &namespaces {
        evaluator.upsert_namespace(&ns.name, &ns.labels);
    }
    for pod in &pods {
        evaluator.upsert_pod(pod.clone());
    }
    let names: Vec<String> = pods
        .iter()
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    let label = |step: usize| format!("{} [{family}] step {step}", case.name);
    let mut ran = 0;
    for (s, step) in case.steps.iter().enumerate() {
        let mut applied = step.apply.clone();
        applied.iter_mut().for_each(|v| substitute(v, vars));
        for edit in &step.swap {
            let rules = stored_rules(&mut raw, edit);
            rules.swap(edit.rules[0], edit.rules[1]);
            applied.push(raw[&edit.policy].clone());
        }
        for edit in &step.set_action {
            stored_rules(&mut raw, edit)[edit.rule]["action"] = Value::from(edit.action.clone());
            applied.push(raw[&edit.policy].clone());
        }
        for object in &applied {
            raw.insert(object_key(object), object.clone());
        }
        let objects = Objects::from_values(applied).unwrap_or_else(|e| panic!("{}: {e}", label(s)));
        for policy in objects.policies {
            policies.insert(policy.id.clone(), policy.clone());
            evaluator.upsert_policy(policy);
        }
        for target in &step.delete {
            let id = delete_ref(target);
            policies.remove(&id);
            evaluator.remove_policy(&id);
        }
        if let Some(change) = &step.label_namespace {
            let ns = namespaces
                .iter_mut()
                .find(|n| n.name == change.name)
                .expect("a layout namespace");
            ns.labels.extend(change.labels.clone());
            evaluator.upsert_namespace(&ns.name, &ns.labels);
        }
        if let Some(change) = &step.label_pod {
            let pod = pods
                .iter_mut()
                .find(|p| format!("{}/{}", p.namespace, p.name) == change.pod)
                .expect("a case pod");
            pod.labels.extend(change.labels.clone());
            evaluator.upsert_pod(pod.clone());
        }
        let scratch = Evaluator::build(
            namespaces
                .iter()
                .map(|n| (n.name.clone(), n.labels.clone())),
            pods.clone(),
            policies.values().cloned(),
        );
        let ids: Vec<_> = pods
            .iter()
            .map(|p| evaluator.pod_id(&p.namespace, &p.name).expect("added"))
            .collect();
        let scratch_ids: Vec<_> = pods
            .iter()
            .map(|p| scratch.pod_id(&p.namespace, &p.name).expect("added"))
            .collect();
        for probe in &step.probes {
            ran += 1;
            let proto = protocol(&probe.protocol);
            let matrix = evaluator.matrix(&ids, probe.port, proto);
            let from_scratch = scratch.matrix(&scratch_ids, probe.port, proto);
            let n = names.len();
            let mut expected = vec![vec![true; n]; n];
            for (from, to, allowed) in &probe.expect {
                for i in 0..n {
                    for j in 0..n {
                        if selects(from, &names[i]) && selects(to, &names[j]) {
                            expected[i][j] = *allowed;
                        }
                    }
                }
            }
            let mut wrong = false;
            for i in 0..n {
                for j in 0..n {
                    let verdict = evaluator.verdict(
                        Endpoint::Pod(ids[i]),
                        Endpoint::Pod(ids[j]),
                        probe.port,
                        proto,
                    );
                    if verdict.allowed != matrix.allowed(i, j) {
                        failures.push(format!(
                            "{} {}/{}: verdict {} → {} is {} but the matrix says {}",
                            label(s),
                            probe.protocol,
                            probe.port,
                            names[i],
                            names[j],
                            verdict.allowed,
                            matrix.allowed(i, j)
                        ));
                    }
                    // Upstream ignores loopback.
                    wrong |= i != j && expected[i][j] != matrix.allowed(i, j);
                }
            }
            let corner = format!("{}/{}", probe.protocol, probe.port);
            if wrong {
                failures.push(format!(
                    "{} {corner}: expected\n{}got\n{}",
                    label(s),
                    truth_table(&corner, &names, |i, j| expected[i][j]),
                    truth_table(&corner, &names, |i, j| matrix.allowed(i, j)),
                ));
            }
            let same =
                (0..n).all(|i| (0..n).all(|j| from_scratch.allowed(i, j) == matrix.allowed(i, j)));
            if !same {
                failures.push(format!(
                    "{} {corner}: the evaluator built from scratch differs",
                    label(s)
                ));
            }
        }
        for (from, to, port, proto, allowed) in &step.checks {
            ran += 1;
            let index = |name: &str| {
                names
                    .iter()
                    .position(|n| n == name)
                    .unwrap_or_else(|| panic!("{name}"))
            };
            let (i, j) = (index(from), index(to));
            let verdict = evaluator.verdict(
                Endpoint::Pod(ids[i]),
                Endpoint::Pod(ids[j]),
                *port,
                protocol(proto),
            );
            if verdict.allowed != *allowed {
                failures.push(format!(
                    "{}: {from} → {to} {proto}/{port}: expected {allowed}, got {verdict:?}",
                    label(s)
                ));
            }
            let scratch_verdict = scratch.verdict(
                Endpoint::Pod(scratch_ids[i]),
                Endpoint::Pod(scratch_ids[j]),
                *port,
                protocol(proto),
            );
            if scratch_verdict != verdict {
                failures.push(format!(
                    "{}: {from} → {to}: from scratch {scratch_verdict:?}",
                    label(s)
                ));
            }
        }
    }
    ran
}

/// How `delete` and rule edits name an object: `namespace/name` or `Kind/name`.
fn object_key(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{ns}/{name}"),
        None => format!("{}/{name}", object["kind"].as_str().unwrap_or_default()),
    }
}

fn stored_rules<'a>(raw: &'a mut BTreeMap<String, Value>, edit: &RuleEdit) -> &'a mut Vec<Value> {
    raw.get_mut(&edit.policy)
        .and_then(|object| object["spec"][edit.direction.as_str()].as_array_mut())
        .unwrap_or_else(|| panic!("{}: no {} rules stored", edit.policy, edit.direction))
}

fn delete_ref(target: &str) -> PolicyRef {
    let (first, name) = target.split_once('/').expect("ns/name or Kind/name");
    let kind = match first {
        "AdminNetworkPolicy" => Some(PolicyKind::AdminNetworkPolicy),
        "BaselineAdminNetworkPolicy" => Some(PolicyKind::BaselineAdminNetworkPolicy),
        "ClusterNetworkPolicy" => Some(PolicyKind::ClusterNetworkPolicy),
        _ => None,
    };
    match kind {
        Some(kind) => PolicyRef {
            kind,
            namespace: None,
            name: name.into(),
        },
        None => PolicyRef {
            kind: PolicyKind::NetworkPolicy,
            namespace: Some(first.into()),
            name: name.into(),
        },
    }
}
