//! MultiNetworkPolicy (`k8s.cni.cncf.io/v1beta1`) on one secondary network: the same
//! evaluator as NetworkPolicy, over that network's view of the cluster — the pods attached to
//! it (by their `k8s.v1.cni.cncf.io/network-status`) with their addresses on it, and the
//! MultiNetworkPolicies whose `k8s.v1.cni.cncf.io/policy-for` names its
//! NetworkAttachmentDefinition, each compiled as the NetworkPolicy it is identical to (and
//! named as a MultiNetworkPolicy in verdicts).
//! NetworkPolicies and the cluster-wide policies govern the cluster network only and are left
//! out, as multi-networkpolicy's implementations leave them out.
//!
//! Pure; knows nothing of how a secondary network's packets travel.

use serde_json::Value;
use tessera_model::multus::{POLICY_FOR_ANNOTATION, network_statuses, status_address};

use crate::model::PolicyKind;
use crate::objects::{ObjectError, Objects};

/// The group of MultiNetworkPolicies.
const GROUP: &str = "k8s.cni.cncf.io";

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(key)?
        .as_str()
}

fn namespace(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
}

/// The definitions (`namespace/name`) a MultiNetworkPolicy applies to: its policy-for
/// annotation, comma-separated, names without a namespace in the policy's.
pub fn policy_for(policy: &Value) -> Vec<String> {
    let home = namespace(policy);
    annotation(policy, POLICY_FOR_ANNOTATION)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('/') {
            Some(_) => item.to_string(),
            None => format!("{home}/{item}"),
        })
        .collect()
}

/// A pod's addresses on `network` (`namespace/name`), from its network-status.
fn addresses_on(pod: &Value, network: &str) -> Vec<String> {
    network_statuses(pod)
        .into_iter()
        .filter(|status| status.name == network)
        .flat_map(|status| status.ips)
        .map(|ip| status_address(&ip).to_string())
        .collect()
}

/// The documents of a multi-document YAML (or JSON) text, empty ones left out.
pub fn yaml_values(text: &str) -> Result<Vec<Value>, ObjectError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| ObjectError::Yaml(e.to_string()))?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// The objects of `network` (`namespace/name` of a NetworkAttachmentDefinition) among
/// `values` (objects or lists): every Namespace, the pods attached to it with their addresses
/// on it as their IPs, its MultiNetworkPolicies as NetworkPolicies.
pub fn network_objects(
    values: impl IntoIterator<Item = Value>,
    network: &str,
) -> Result<Objects, ObjectError> {
    let mut objects = Objects::default();
    let mut pending: Vec<Value> = values.into_iter().collect();
    while let Some(mut value) = pending.pop() {
        if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
            pending.extend(std::mem::take(items));
            continue;
        }
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match (group, kind) {
            ("", "Namespace") => objects.add(value)?,
            ("", "Pod") => {
                let ips = addresses_on(&value, network);
                if ips.is_empty() {
                    objects.skipped += 1;
                    continue;
                }
                value["status"]["podIP"] = Value::from(ips[0].clone());
                value["status"]["podIPs"] =
                    ips.iter().map(|ip| serde_json::json!({"ip": ip})).collect();
                objects.add(value)?;
            }
            (GROUP, "MultiNetworkPolicy") if policy_for(&value).iter().any(|n| n == network) => {
                value["apiVersion"] = Value::from("networking.k8s.io/v1");
                value["kind"] = Value::from("NetworkPolicy");
                objects.add(value)?;
                // Named as what it is in verdicts and explanations.
                if let Some(policy) = objects.policies.last_mut() {
                    policy.id.kind = PolicyKind::MultiNetworkPolicy;
                }
            }
            _ => objects.skipped += 1,
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluator::Endpoint;
    use crate::model::{EndpointName, Protocol};

    /// Three pods in `ml`: a trainer and a loader on the storage network, a web pod on the
    /// cluster network only; a NetworkPolicy denying everything (cluster network only).
    const CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {team: ml}}
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
  labels: {app: trainer}
  annotations:
    k8s.v1.cni.cncf.io/network-status: '[{"name":"tessera-pod-network","interface":"eth0","ips":["10.244.2.2"],"mac":"0a:58:0a:f4:02:02","default":true,"dns":{}},{"name":"ml/storage","interface":"net1","ips":["172.17.2.2"],"mac":"0a:58:ac:11:02:02","dns":{}}]'
status: {podIP: 10.244.2.2}
---
apiVersion: v1
kind: Pod
metadata:
  name: loader
  namespace: ml
  labels: {app: loader}
  annotations:
    k8s.v1.cni.cncf.io/network-status: '[{"name":"tessera-pod-network","interface":"eth0","ips":["10.244.3.2"],"mac":"0a:58:0a:f4:03:02","default":true,"dns":{}},{"name":"ml/storage","interface":"net1","ips":["172.17.3.2"],"mac":"0a:58:ac:11:03:02","dns":{}}]'
status: {podIP: 10.244.3.2}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: ml, labels: {app: web}}
status: {podIP: 10.244.4.2}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: ml}
spec: {podSelector: {}}
"#;

    const STORAGE_ONLY_FROM_LOADER: &str = r#"
apiVersion: k8s.cni.cncf.io/v1beta1
kind: MultiNetworkPolicy
metadata:
  name: storage-from-loader
  namespace: ml
  annotations: {k8s.v1.cni.cncf.io/policy-for: storage}
spec:
  podSelector: {matchLabels: {app: trainer}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {app: loader}}}]
    ports: [{port: 2049, protocol: TCP}]
"#;

    const OTHER_NETWORK: &str = r#"
apiVersion: k8s.cni.cncf.io/v1beta1
kind: MultiNetworkPolicy
metadata:
  name: hpn-deny
  namespace: ml
  annotations: {k8s.v1.cni.cncf.io/policy-for: ml/hpn}
spec:
  podSelector: {}
  policyTypes: [Ingress]
"#;

    fn documents(texts: &[&str]) -> Vec<Value> {
        texts
            .iter()
            .flat_map(|t| yaml_values(t).expect("yaml"))
            .collect()
    }

    #[test]
    fn policy_for_names_resolve_in_the_policys_namespace() {
        let policy = serde_json::json!({"metadata": {"namespace": "ml", "annotations":
            {POLICY_FOR_ANNOTATION: "storage, infra/hpn,"}}});
        assert_eq!(policy_for(&policy), ["ml/storage", "infra/hpn"]);
        assert!(policy_for(&serde_json::json!({"metadata": {}})).is_empty());
    }

    #[test]
    fn multi_network_policies_decide_on_their_network_only() {
        // (case, documents, from, to, port, allowed; None: the pod is not on the network)
        type Case = (
            &'static str,
            Vec<&'static str>,
            &'static str,
            &'static str,
            u16,
            Option<bool>,
        );
        let cases: Vec<Case> = vec![
            (
                "no MultiNetworkPolicy: the NetworkPolicy does not reach storage",
                vec![CLUSTER],
                "ml/loader",
                "ml/trainer",
                2049,
                Some(true),
            ),
            (
                "the policy lets the loader in on its port",
                vec![CLUSTER, STORAGE_ONLY_FROM_LOADER],
                "ml/loader",
                "ml/trainer",
                2049,
                Some(true),
            ),
            (
                "and no other port",
                vec![CLUSTER, STORAGE_ONLY_FROM_LOADER],
                "ml/loader",
                "ml/trainer",
                22,
                Some(false),
            ),
            (
                "the trainer is not isolated for egress",
                vec![CLUSTER, STORAGE_ONLY_FROM_LOADER],
                "ml/trainer",
                "ml/loader",
                2049,
                Some(true),
            ),
            (
                "a policy for another network changes nothing here",
                vec![CLUSTER, OTHER_NETWORK],
                "ml/loader",
                "ml/trainer",
                22,
                Some(true),
            ),
            (
                "a pod without the attachment is not on the network",
                vec![CLUSTER, STORAGE_ONLY_FROM_LOADER],
                "ml/web",
                "ml/trainer",
                2049,
                None,
            ),
        ];
        for (case, texts, from, to, port, want) in cases {
            let evaluator = network_objects(documents(&texts), "ml/storage")
                .expect("objects")
                .evaluator();
            let endpoint =
                |name: &str| evaluator.endpoint(&EndpointName::parse(name).expect("a pod name"));
            let got = match (endpoint(from), endpoint(to)) {
                (Some(from), Some(to)) => {
                    Some(evaluator.verdict(from, to, port, Protocol::Tcp).allowed)
                }
                _ => None,
            };
            assert_eq!(got, want, "{case}");
        }
        let evaluator = network_objects(documents(&[CLUSTER]), "ml/storage")
            .expect("objects")
            .evaluator();
        let trainer = evaluator.pod_id("ml", "trainer").expect("on storage");
        let ips: Vec<String> = evaluator
            .pod(trainer)
            .map(|p| p.ips.iter().map(|ip| ip.to_string()).collect())
            .unwrap_or_default();
        assert_eq!(ips, ["172.17.2.2"], "addresses on the network");

        // A drop names the MultiNetworkPolicy that decided, as what it is.
        let evaluator = network_objects(
            documents(&[CLUSTER, STORAGE_ONLY_FROM_LOADER]),
            "ml/storage",
        )
        .expect("objects")
        .evaluator();
        let id = |name| Endpoint::Pod(evaluator.pod_id("ml", name).expect("on storage"));
        let verdict = evaluator.verdict(id("loader"), id("trainer"), 22, Protocol::Tcp);
        let (_, decision) = verdict.decided_by();
        let policy = decision.policy.as_ref().expect("a deciding policy");
        assert_eq!(
            (policy.kind, policy.to_string()),
            (
                PolicyKind::MultiNetworkPolicy,
                "MultiNetworkPolicy ml/storage-from-loader".to_string()
            )
        );
    }
}
