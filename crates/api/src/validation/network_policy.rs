//! NetworkPolicy (`networking.k8s.io/v1`) as upstream's `ValidateNetworkPolicySpec` checks
//! it beyond the schema, with its field paths and messages: ports (protocol, number or IANA
//! name, `endPort` only after a numeric `port` and not below it), peers (at least one
//! selector or an `ipBlock`, an `ipBlock` alone), `ipBlock` CIDRs (legacy, sloppy parsing)
//! and exceptions strictly inside the block, and `policyTypes`. CIDR parsing is the policy
//! core's (`tessera_netpol::cidr`). Label selectors' syntax is not checked here.

use serde_json::{Value, json};
use tessera_netpol::cidr::Cidr;

use super::pod_spec::formats;
use crate::error::Cause;

const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
const POLICY_TYPES: &[&str] = &["Ingress", "Egress"];
const CIDR_MESSAGE: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

fn items<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The causes of a NetworkPolicy object.
pub fn validate(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(spec) = object.get("spec") else {
        return causes;
    };
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(spec, direction).iter().enumerate() {
            let rule_path = format!("spec.{direction}[{i}]");
            for (j, port) in items(rule, "ports").iter().enumerate() {
                check_port(port, &format!("{rule_path}.ports[{j}]"), &mut causes);
            }
            for (j, peer) in items(rule, peers).iter().enumerate() {
                check_peer(peer, &format!("{rule_path}.{peers}[{j}]"), &mut causes);
            }
        }
    }
    let types = items(spec, "policyTypes");
    if types.len() > POLICY_TYPES.len() {
        causes.push(Cause::invalid(
            "spec.policyTypes",
            &json!(types),
            "may not specify more than two policyTypes",
        ));
        return causes;
    }
    for (i, kind) in types.iter().enumerate() {
        if !kind.as_str().is_some_and(|k| POLICY_TYPES.contains(&k)) {
            causes.push(Cause::not_supported(
                format!("spec.policyTypes[{i}]"),
                kind,
                POLICY_TYPES,
            ));
        }
    }
    causes
}

fn check_port(port: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(protocol) = port.get("protocol").filter(|p| !p.is_null())
        && !protocol.as_str().is_some_and(|p| PROTOCOLS.contains(&p))
    {
        causes.push(Cause::not_supported(
            format!("{path}.protocol"),
            protocol,
            PROTOCOLS,
        ));
    }
    let end_port = port.get("endPort").filter(|e| !e.is_null());
    let end_path = format!("{path}.endPort");
    match port.get("port").filter(|p| !p.is_null()) {
        Some(Value::String(name)) => {
            if let Some(end) = end_port {
                causes.push(Cause::invalid(
                    &end_path,
                    end,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            causes.extend(
                formats::port_name(name)
                    .into_iter()
                    .map(|problem| Cause::invalid(format!("{path}.port"), &json!(name), problem)),
            );
        }
        Some(number) => {
            let number = number.as_i64().unwrap_or_default();
            causes.extend(
                formats::port_number(number)
                    .into_iter()
                    .map(|problem| Cause::invalid(format!("{path}.port"), &json!(number), problem)),
            );
            if let Some(end) = end_port {
                let end_number = end.as_i64().unwrap_or_default();
                if end_number < number {
                    causes.push(Cause::invalid(
                        &end_path,
                        end,
                        "must be greater than or equal to `port`",
                    ));
                }
                causes.extend(
                    formats::port_number(end_number)
                        .into_iter()
                        .map(|problem| Cause::invalid(&end_path, end, problem)),
                );
            }
        }
        None => {
            if let Some(end) = end_port {
                causes.push(Cause::invalid(
                    &end_path,
                    end,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
}

fn check_peer(peer: &Value, path: &str, causes: &mut Vec<Cause>) {
    let present = |key: &str| peer.get(key).is_some_and(|v| !v.is_null());
    let ip_block = peer.get("ipBlock").filter(|v| !v.is_null());
    if let Some(block) = ip_block {
        check_ip_block(block, &format!("{path}.ipBlock"), causes);
    }
    let count = ["podSelector", "namespaceSelector", "ipBlock"]
        .into_iter()
        .filter(|key| present(key))
        .count();
    if count == 0 {
        causes.push(Cause::required_because(path, "must specify a peer"));
    } else if count > 1 && ip_block.is_some() {
        causes.push(Cause::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

fn check_ip_block(block: &Value, path: &str, causes: &mut Vec<Cause>) {
    let cidr_text = block
        .get("cidr")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if cidr_text.is_empty() {
        causes.push(Cause::required(format!("{path}.cidr")));
        return;
    }
    let Ok(cidr) = cidr_text.parse::<Cidr>() else {
        causes.push(Cause::invalid(
            format!("{path}.cidr"),
            &json!(cidr_text),
            CIDR_MESSAGE,
        ));
        return;
    };
    for (i, except) in items(block, "except").iter().enumerate() {
        let except_path = format!("{path}.except[{i}]");
        let text = except.as_str().unwrap_or_default();
        match text.parse::<Cidr>() {
            Err(_) => causes.push(Cause::invalid(&except_path, &json!(text), CIDR_MESSAGE)),
            Ok(inner) if !(cidr.covers(&inner) && inner.prefix() > cidr.prefix()) => {
                causes.push(Cause::invalid(
                    &except_path,
                    &json!(text),
                    "must be a strict subset of `cidr`",
                ))
            }
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(spec: Value) -> Vec<String> {
        validate(&json!({"spec": spec}))
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    /// Cases of upstream's `TestValidateNetworkPolicy` (pkg/apis/networking/validation),
    /// with the messages upstream returns.
    #[test]
    fn network_policies_are_refused_as_upstream_refuses_them() {
        let ingress_port = |port: Value| json!({"ingress": [{"ports": [port]}]});
        let ingress_peer = |peer: Value| json!({"ingress": [{"from": [peer]}]});
        let egress_peer = |peer: Value| json!({"egress": [{"to": [peer]}]});
        let table: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "valid",
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "endPort": 90, "protocol": "TCP"}, {"port": "http"}],
                "from": [{"podSelector": {}}, {"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.3.0/24"]}}]}],
                "egress": [{"to": [{"ipBlock": {"cidr": "fd00::/8", "except": ["fd00:1::/64"]}}]}], "policyTypes": ["Ingress", "Egress"]}),
                vec![],
            ),
            (
                "invalid protocol",
                ingress_port(json!({"protocol": "ICMP", "port": 80})),
                vec![
                    r#"spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP""#,
                ],
            ),
            (
                "port out of range",
                ingress_port(json!({"port": 70000})),
                vec![
                    "spec.ingress[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                "invalid port name",
                ingress_port(json!({"port": "!@#$"})),
                vec![
                    r#"spec.ingress[0].ports[0].port: Invalid value: "!@#$": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"#,
                    r#"spec.ingress[0].ports[0].port: Invalid value: "!@#$": must contain at least one letter (a-z)"#,
                ],
            ),
            (
                "endPort below port",
                ingress_port(json!({"port": 35000, "endPort": 32000})),
                vec![
                    "spec.ingress[0].ports[0].endPort: Invalid value: 32000: must be greater than or equal to `port`",
                ],
            ),
            (
                "endPort out of range",
                ingress_port(json!({"port": 30000, "endPort": 65537})),
                vec![
                    "spec.ingress[0].ports[0].endPort: Invalid value: 65537: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                "endPort with a named port",
                ingress_port(json!({"port": "http", "endPort": 32000})),
                vec![
                    "spec.ingress[0].ports[0].endPort: Invalid value: 32000: may not be specified when `port` is non-numeric",
                ],
            ),
            (
                "endPort without a port",
                ingress_port(json!({"endPort": 32000})),
                vec![
                    "spec.ingress[0].ports[0].endPort: Invalid value: 32000: may not be specified when `port` is not specified",
                ],
            ),
            (
                "empty peer",
                ingress_peer(json!({})),
                vec!["spec.ingress[0].from[0]: Required value: must specify a peer"],
            ),
            (
                "ipBlock with a selector",
                egress_peer(json!({"podSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8"}})),
                vec![
                    "spec.egress[0].to[0]: Forbidden: may not specify both ipBlock and another peer",
                ],
            ),
            (
                "missing cidr",
                ingress_peer(json!({"ipBlock": {"cidr": ""}})),
                vec!["spec.ingress[0].from[0].ipBlock.cidr: Required value"],
            ),
            (
                "malformed cidr",
                ingress_peer(json!({"ipBlock": {"cidr": "192.168.5.6"}})),
                vec![
                    r#"spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "192.168.5.6": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"#,
                ],
            ),
            (
                "prefix too long",
                egress_peer(json!({"ipBlock": {"cidr": "fd00:192:168::/129"}})),
                vec![
                    r#"spec.egress[0].to[0].ipBlock.cidr: Invalid value: "fd00:192:168::/129": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"#,
                ],
            ),
            (
                "malformed except",
                ingress_peer(
                    json!({"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.1.0"]}}),
                ),
                vec![
                    r#"spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "192.168.1.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"#,
                ],
            ),
            (
                "except outside cidr",
                ingress_peer(
                    json!({"ipBlock": {"cidr": "192.168.8.0/24", "except": ["192.168.9.1/24"]}}),
                ),
                vec![
                    r#"spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "192.168.9.1/24": must be a strict subset of `cidr`"#,
                ],
            ),
            (
                "except equal to cidr",
                ingress_peer(
                    json!({"ipBlock": {"cidr": "192.168.0.0/24", "except": ["192.168.0.0/24"]}}),
                ),
                vec![
                    r#"spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "192.168.0.0/24": must be a strict subset of `cidr`"#,
                ],
            ),
            (
                "except of another family",
                egress_peer(json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["fd00::/64"]}})),
                vec![
                    r#"spec.egress[0].to[0].ipBlock.except[0]: Invalid value: "fd00::/64": must be a strict subset of `cidr`"#,
                ],
            ),
            (
                "legacy leading zeros",
                ingress_peer(json!({"ipBlock": {"cidr": "010.000.0.0/08"}})),
                vec![],
            ),
            (
                "unknown policy type",
                json!({"policyTypes": ["Ingress", "foo"]}),
                vec![
                    r#"spec.policyTypes[1]: Unsupported value: "foo": supported values: "Ingress", "Egress""#,
                ],
            ),
            (
                "three policy types",
                json!({"policyTypes": ["Ingress", "Egress", "Ingress"]}),
                vec![
                    r#"spec.policyTypes: Invalid value: ["Ingress","Egress","Ingress"]: may not specify more than two policyTypes"#,
                ],
            ),
        ];
        for (name, spec, want) in table {
            assert_eq!(messages(spec), want, "{name}");
        }
    }
}
