//! Gateway API (`gateway.networking.k8s.io`, standard channel v1) as Tessera's built-in
//! controller decides it: which GatewayClasses it owns and accepts ([`gateway`]), each
//! Gateway's listeners, their conflicts and the address the Gateway gets, which routes attach
//! to which listeners and whether their backend references resolve ([`attach`]), the status
//! objects all of that becomes ([`status`]), and where one request goes ([`routing`]): the
//! listener, the route rule by the spec's precedence, the filters, the weighted backend.
//!
//! A core: it reads the stored objects as JSON ([`Inputs`]) and returns decisions. Time
//! arrives as formatted text, the backend pick as a seed. It knows no store, no sockets and
//! no endpoints: a decision names a backend (a Service, or a kind the caller registered
//! through [`ExtraBackendKind`]); reaching a pod behind it is the dataplane's business.

pub mod attach;
pub mod crd;
pub mod gateway;
pub mod hostname;
pub mod objects;
pub mod routing;
pub mod status;

use std::net::Ipv4Addr;

use serde_json::Value;
use tessera_model::net::Ipv4Cidr;

pub use attach::{BackendVerdict, ParentVerdict, RouteState};
pub use gateway::{ClassVerdict, GatewayState, ListenerState};
pub use objects::{Key, RouteKind};
pub use routing::{Backend, Forward, Request, Routed};

/// The API group.
pub const GROUP: &str = "gateway.networking.k8s.io";
/// The controllerName of the GatewayClasses Tessera's controller owns.
pub const CONTROLLER_NAME: &str = "tessera.dev/gateway-controller";
/// The label a Gateway's (simulated) proxy carries, as implementations label the pods of a
/// Gateway (GEP-1762): network policy selects the proxy by it.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// The addresses Gateways get when `tessera up` says nothing else: the top of a
/// docker-network-like range, as cloud-provider-kind hands out LoadBalancer addresses.
pub fn default_address_pool() -> Ipv4Cidr {
    Ipv4Cidr::new(Ipv4Addr::new(172, 18, 255, 0), 24)
}

/// A backend kind beyond core Services that the caller knows how to reach (the seam for
/// InferencePool): references of this group and kind resolve when the named object exists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraBackendKind {
    /// The kind's API group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// Whether a reference must name a port (Services must; InferencePool must not).
    pub port_required: bool,
    /// The objects of that kind that exist, as (namespace, name).
    pub objects: Vec<Key>,
}

/// Everything the decisions read: the stored objects as JSON.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// GatewayClasses.
    pub classes: Vec<Value>,
    /// Gateways.
    pub gateways: Vec<Value>,
    /// HTTPRoutes.
    pub http_routes: Vec<Value>,
    /// GRPCRoutes.
    pub grpc_routes: Vec<Value>,
    /// ReferenceGrants.
    pub reference_grants: Vec<Value>,
    /// Services (backends).
    pub services: Vec<Value>,
    /// Namespaces (for `allowedRoutes.namespaces.selector`).
    pub namespaces: Vec<Value>,
    /// Backend kinds besides Service.
    pub extra_backends: Vec<ExtraBackendKind>,
    /// Where Gateways' addresses come from.
    pub address_pool: Ipv4Cidr,
}

impl Default for Inputs {
    fn default() -> Self {
        Inputs {
            classes: Vec::new(),
            gateways: Vec::new(),
            http_routes: Vec::new(),
            grpc_routes: Vec::new(),
            reference_grants: Vec::new(),
            services: Vec::new(),
            namespaces: Vec::new(),
            extra_backends: Vec::new(),
            address_pool: default_address_pool(),
        }
    }
}

/// Every decision over one [`Inputs`]: classes, Gateways (Tessera's only) and routes.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// The GatewayClasses Tessera's controller owns, by name.
    pub classes: Vec<ClassVerdict>,
    /// The Gateways of accepted classes.
    pub gateways: Vec<GatewayState>,
    /// Every route with at least one parent reference to one of those Gateways.
    pub routes: Vec<RouteState>,
}

impl Model {
    /// Decides everything over `inputs`.
    pub fn build(inputs: &Inputs) -> Model {
        let classes = gateway::classes(&inputs.classes);
        let mut gateways = gateway::gateways(&classes, &inputs.gateways, inputs.address_pool);
        let routes = attach::routes(inputs, &mut gateways);
        Model {
            classes,
            gateways,
            routes,
        }
    }

    /// The Gateway holding `address`, if any.
    pub fn gateway_at(&self, address: Ipv4Addr) -> Option<&GatewayState> {
        self.gateways.iter().find(|g| g.address == Some(address))
    }

    /// The Gateway `key`.
    pub fn gateway(&self, key: &Key) -> Option<&GatewayState> {
        self.gateways.iter().find(|g| &g.key == key)
    }
}
