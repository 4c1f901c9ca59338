use serde_json::Value;

use super::*;

fn deployment(offer: Offer, node_policy: bool) -> AgentDeployment {
    AgentDeployment {
        namespace: "tessera-agent".into(),
        image: "example.com/tessera:1".into(),
        offer,
        node_selector: vec![("nvidia.com/gpu.present".into(), "true".into())],
        node_policy,
    }
}

fn kinds(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn the<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn host_paths(objects: &[Value]) -> Vec<String> {
    the(objects, "DaemonSet")["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/hostPath/path").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

#[test]
fn each_offer_gets_only_what_it_uses() {
    let cases: &[(Offer, bool, &[&str], &[&str])] = &[
        (
            Offer::DevicePlugin,
            true,
            &["Namespace", "ServiceAccount", "DaemonSet"],
            &["/var/lib/kubelet/device-plugins"],
        ),
        (
            Offer::Dra,
            false,
            &[
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "DeviceClass",
                "DeviceClass",
                "DaemonSet",
            ],
            &[
                "/var/lib/kubelet/plugins/gpu.nvidia.com",
                "/var/lib/kubelet/plugins_registry",
                "/var/run/cdi",
            ],
        ),
        (
            Offer::Dra,
            true,
            &[
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "DeviceClass",
                "DeviceClass",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding",
                "DaemonSet",
            ],
            &[
                "/var/lib/kubelet/plugins/gpu.nvidia.com",
                "/var/lib/kubelet/plugins_registry",
                "/var/run/cdi",
            ],
        ),
    ];
    for (offer, policy, want_kinds, want_paths) in cases {
        let objects = manifests(&deployment(*offer, *policy));
        let mut got_kinds = kinds(&objects);
        // The DeviceClasses are the driver's own; their number follows the catalog.
        let classes = got_kinds.iter().filter(|k| *k == "DeviceClass").count();
        assert!(*offer == Offer::DevicePlugin || classes >= 1, "{offer:?}");
        got_kinds.dedup();
        let mut want: Vec<String> = want_kinds.iter().map(|k| k.to_string()).collect();
        want.dedup();
        assert_eq!(got_kinds, want, "{offer:?} policy={policy}");
        assert_eq!(host_paths(&objects), *want_paths, "{offer:?}");
        let token = objects
            .iter()
            .find(|o| o["kind"] == "ServiceAccount")
            .map(|sa| sa["automountServiceAccountToken"].clone());
        assert_eq!(token, Some(Value::Bool(*offer == Offer::Dra)), "{offer:?}");
    }
}

#[test]
fn the_container_is_confined() {
    for offer in [Offer::DevicePlugin, Offer::Dra] {
        let objects = manifests(&deployment(offer, true));
        let pod = &the(&objects, "DaemonSet")["spec"]["template"];
        let container = &pod["spec"]["containers"][0];
        let security = &container["securityContext"];
        assert_eq!(security["privileged"], false);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert!(security["capabilities"].get("add").is_none());
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(
            pod["spec"]["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert!(pod["spec"].get("hostNetwork").is_none());
        assert!(pod["spec"].get("hostPID").is_none());
        assert_eq!(
            pod["metadata"]["annotations"]["cdi.k8s.io/tessera-agent"],
            "nvidia.com/gpu=all"
        );
        assert_eq!(
            pod["spec"]["nodeSelector"]["nvidia.com/gpu.present"],
            "true"
        );
        // Every mount is a volume, and every volume is mounted: nothing else of the host.
        let mounts = container["volumeMounts"].as_array().map(Vec::len);
        let volumes = pod["spec"]["volumes"].as_array().map(Vec::len);
        assert_eq!(mounts, volumes);
    }
}

#[test]
fn the_namespace_relaxes_pod_security_for_the_agent_alone() {
    let objects = manifests(&deployment(Offer::Dra, true));
    let labels = &the(&objects, "Namespace")["metadata"]["labels"];
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    assert_eq!(labels["pod-security.kubernetes.io/audit"], "baseline");
    let kinds = kinds(&objects);
    let namespaced: Vec<&Value> = objects
        .iter()
        .filter(|o| o.pointer("/metadata/namespace").is_some())
        .collect();
    assert!(
        namespaced
            .iter()
            .all(|o| o["metadata"]["namespace"] == "tessera-agent")
    );
    assert_eq!(kinds.iter().filter(|k| *k == "Namespace").count(), 1);
}

#[test]
fn the_driver_may_write_slices_and_read_claims_only() {
    let rules = dra_rules();
    let rules = rules.as_array().map(Vec::as_slice).unwrap_or_default();
    let grants: Vec<(String, String)> = rules
        .iter()
        .flat_map(|rule| {
            let resources = rule["resources"].as_array().cloned().unwrap_or_default();
            let verbs = rule["verbs"].as_array().cloned().unwrap_or_default();
            resources.into_iter().flat_map(move |r| {
                verbs
                    .clone()
                    .into_iter()
                    .map(move |v| (r.as_str().unwrap_or_default().to_string(), v.to_string()))
            })
        })
        .collect();
    assert!(
        grants
            .iter()
            .all(|(r, _)| r == "resourceslices" || r == "resourceclaims")
    );
    assert!(grants.iter().all(|(_, v)| v != "\"*\""));
    let claims: Vec<&str> = grants
        .iter()
        .filter(|(r, _)| r == "resourceclaims")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(claims, vec!["\"get\""]);
}

#[test]
fn the_node_policy_names_the_agent_and_its_node() {
    let objects = manifests(&deployment(Offer::Dra, true));
    let policy = the(&objects, "ValidatingAdmissionPolicy");
    let condition = policy["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        condition,
        "request.userInfo.username == \"system:serviceaccount:tessera-agent:tessera-agent\""
    );
    let binding = the(&objects, "ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
}
