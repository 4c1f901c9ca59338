//! The seam where network policy decides whether a connection is allowed.
//!
//! The dataplane asks [`PolicyVerdict::allowed`] once per probe, after the Service address has
//! been translated to an endpoint, with the source pod and the destination (a pod or a bare
//! address) as NetworkPolicy sees them. Which policies exist and how they combine is the
//! policy core's business; this module knows only the question and the allow-all answer a
//! cluster without policies gives.

use std::net::Ipv4Addr;

use serde_json::Value;

/// A transport protocol, as a Service or container port names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// `TCP`.
    Tcp,
    /// `UDP`.
    Udp,
    /// `SCTP`.
    Sctp,
}

impl Protocol {
    /// The API's spelling (`TCP`); an empty one is TCP, as the API defaults it.
    pub fn parse_api(text: &str) -> Option<Protocol> {
        match text {
            "" | "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The API's spelling.
    pub fn api_name(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

/// Where a connection goes, after Service translation.
#[derive(Debug, Clone, Copy)]
pub enum Peer<'a> {
    /// A pod (its object).
    Pod(&'a Value),
    /// An address that is no pod's (a node, something outside the cluster).
    Address(Ipv4Addr),
}

/// Whether policy lets a connection through, judged at both ends.
pub trait PolicyVerdict {
    /// Whether `from` may open a connection to `to` on `port`/`protocol` (egress of `from`
    /// and ingress of `to`).
    fn allowed(&self, from: &Value, to: Peer<'_>, port: u16, protocol: Protocol) -> bool;

    /// Whether `from` may open a connection to the pod `to` over the secondary network
    /// `network` (`namespace/name` of its NetworkAttachmentDefinition): the question
    /// MultiNetworkPolicy answers. NetworkPolicies do not govern secondary networks; a
    /// verdict that knows no MultiNetworkPolicies allows everything.
    fn allowed_on(
        &self,
        network: &str,
        from: &Value,
        to: &Value,
        port: u16,
        protocol: Protocol,
    ) -> bool {
        let _ = (network, from, to, port, protocol);
        true
    }
}

/// A cluster without policies: everything is allowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl PolicyVerdict for AllowAll {
    fn allowed(&self, _: &Value, _: Peer<'_>, _: u16, _: Protocol) -> bool {
        true
    }
}
