//! Route attachment and reference resolution: for each parentRef of an HTTPRoute or GRPCRoute
//! to one of Tessera's Gateways, which listeners take it (sectionName, port, the listener's
//! `allowedRoutes` namespaces and kinds, hostname intersection) and why not, with upstream's
//! reasons (`NoMatchingParent`, `NotAllowedByListeners`, `NoMatchingListenerHostname`,
//! `UnsupportedValue`); and for each backendRef whether it resolves (`BackendNotFound`,
//! `InvalidKind`, `RefNotPermitted` without a ReferenceGrant). Attached routes are counted
//! on their listeners.
//!
//! Parent references to Gateways that are not Tessera's are ignored: another controller
//! answers for them.

use serde_json::Value;
use tessera_model::json::text;
use tessera_model::selector;

use crate::gateway::{GatewayState, ListenerState};
use crate::hostname;
use crate::objects::{self, BackendRef, Key, ParentRef, Route, RouteKind, Rule};
use crate::{ExtraBackendKind, GROUP, Inputs};

/// What was decided for one parentRef to a Tessera Gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentVerdict {
    /// The reference.
    pub parent: ParentRef,
    /// The Gateway (index into the model's gateways).
    pub gateway: usize,
    /// The listeners (indexes) it attached to, or the `Accepted=False` reason and message.
    pub accepted: Result<Vec<usize>, (&'static str, String)>,
}

/// Whether one backendRef resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendVerdict {
    /// It names an existing object the route may reach.
    Resolved,
    /// It does not: the `ResolvedRefs=False` reason and message.
    Unresolved(&'static str, String),
}

/// A route with at least one parent on a Tessera Gateway, read and decided.
#[derive(Debug, Clone)]
pub struct RouteState {
    /// The route read.
    pub route: Route,
    /// Per parentRef of Tessera's (others are absent).
    pub parents: Vec<ParentVerdict>,
    /// Per rule, per backendRef.
    pub backends: Vec<Vec<BackendVerdict>>,
}

impl RouteState {
    /// `ResolvedRefs`: `Ok`, or the first failure's reason with every failure's message.
    pub fn resolved_refs(&self) -> Result<(), (&'static str, String)> {
        let failures: Vec<(&'static str, &String)> = self
            .backends
            .iter()
            .flatten()
            .filter_map(|v| match v {
                BackendVerdict::Resolved => None,
                BackendVerdict::Unresolved(reason, message) => Some((*reason, message)),
            })
            .collect();
        match failures.first() {
            None => Ok(()),
            Some((reason, _)) => Err((
                reason,
                failures
                    .iter()
                    .map(|(_, m)| m.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            )),
        }
    }
}

/// Whether a listener's `allowedRoutes.namespaces` lets a route of `namespace` in.
fn namespace_allowed(
    listener: &ListenerState,
    gateway_namespace: &str,
    namespace: &str,
    namespaces: &[Value],
) -> bool {
    let from = listener
        .allowed_routes
        .pointer("/namespaces/from")
        .and_then(Value::as_str)
        .unwrap_or("Same");
    match from {
        "All" => true,
        "Selector" => {
            let Some(ns) = namespaces
                .iter()
                .find(|n| text(n, "/metadata/name") == namespace)
            else {
                return false;
            };
            selector::matches(
                listener.allowed_routes.pointer("/namespaces/selector"),
                &selector::labels(ns),
            )
        }
        _ => gateway_namespace == namespace,
    }
}

fn attach(
    route: &Route,
    parent: &ParentRef,
    gateway: &GatewayState,
    namespaces: &[Value],
) -> Result<Vec<usize>, (&'static str, String)> {
    let gateway_name = format!("{}/{}", gateway.key.0, gateway.key.1);
    if !gateway.class_accepted {
        return Err((
            "NoMatchingParent",
            format!(
                "Gateway {gateway_name}'s GatewayClass {:?} is not accepted",
                gateway.class
            ),
        ));
    }
    let mut candidates: Vec<usize> = (0..gateway.listeners.len()).collect();
    if let Some(section) = &parent.section {
        candidates.retain(|&i| &gateway.listeners[i].name == section);
        if candidates.is_empty() {
            return Err((
                "NoMatchingParent",
                format!("Gateway {gateway_name} has no listener named {section:?}"),
            ));
        }
    }
    if let Some(port) = parent.port {
        candidates.retain(|&i| gateway.listeners[i].port == port);
        if candidates.is_empty() {
            return Err((
                "NoMatchingParent",
                format!("Gateway {gateway_name} has no listener on port {port}"),
            ));
        }
    }
    candidates.retain(|&i| gateway.listeners[i].usable());
    if candidates.is_empty() {
        return Err((
            "NoMatchingParent",
            format!("no listener of Gateway {gateway_name} that the reference selects is accepted"),
        ));
    }
    candidates.retain(|&i| {
        let listener = &gateway.listeners[i];
        listener.kinds.contains(&route.kind)
            && namespace_allowed(listener, &gateway.key.0, &route.key.0, namespaces)
    });
    if candidates.is_empty() {
        return Err((
            "NotAllowedByListeners",
            format!(
                "no listener of Gateway {gateway_name} allows a {} from namespace {:?}",
                route.kind.name(),
                route.key.0
            ),
        ));
    }
    candidates.retain(|&i| {
        hostname::intersect(gateway.listeners[i].hostname.as_deref(), &route.hostnames)
            .is_none_or(|hosts| !hosts.is_empty())
    });
    if candidates.is_empty() {
        return Err((
            "NoMatchingListenerHostname",
            format!(
                "no hostname of the route intersects a listener hostname of Gateway {gateway_name}"
            ),
        ));
    }
    if !route.problems.is_empty() {
        return Err(("UnsupportedValue", route.problems.join("; ")));
    }
    Ok(candidates)
}

/// Whether a ReferenceGrant in the backend's namespace lets a route of `kind` in
/// `namespace` refer to it.
pub fn granted(grants: &[Value], kind: RouteKind, namespace: &str, backend: &BackendRef) -> bool {
    grants
        .iter()
        .filter(|g| text(g, "/metadata/namespace") == backend.namespace)
        .any(|grant| {
            let listed = |pointer: &str| {
                grant
                    .pointer(pointer)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            };
            let from = listed("/spec/from").iter().any(|f| {
                text(f, "/group") == GROUP
                    && text(f, "/kind") == kind.name()
                    && text(f, "/namespace") == namespace
            });
            let to = listed("/spec/to").iter().any(|t| {
                text(t, "/group") == backend.group
                    && text(t, "/kind") == backend.kind
                    && (text(t, "/name").is_empty() || text(t, "/name") == backend.name)
            });
            from && to
        })
}

fn resolve(route: &Route, backend: &BackendRef, inputs: &Inputs) -> BackendVerdict {
    let target = format!("{}/{}", backend.namespace, backend.name);
    let is_service = backend.group.is_empty() && backend.kind == "Service";
    let extra: Option<&ExtraBackendKind> = inputs
        .extra_backends
        .iter()
        .find(|k| k.group == backend.group && k.kind == backend.kind);
    if !is_service && extra.is_none() {
        let kind = if backend.group.is_empty() {
            backend.kind.clone()
        } else {
            format!("{}/{}", backend.group, backend.kind)
        };
        return BackendVerdict::Unresolved(
            "InvalidKind",
            format!("backendRef {target}: kind {kind:?} is not supported"),
        );
    }
    if backend.namespace != route.key.0
        && !granted(&inputs.reference_grants, route.kind, &route.key.0, backend)
    {
        return BackendVerdict::Unresolved(
            "RefNotPermitted",
            format!(
                "backendRef {target}: no ReferenceGrant in namespace {:?} allows a {} from namespace {:?} to refer to it",
                backend.namespace,
                route.kind.name(),
                route.key.0
            ),
        );
    }
    let port_required = extra.is_none_or(|k| k.port_required);
    if port_required && backend.port.is_none() {
        return BackendVerdict::Unresolved(
            "UnsupportedValue",
            format!("backendRef {target}: port is required"),
        );
    }
    let exists = match extra {
        Some(extra) => extra
            .objects
            .iter()
            .any(|(ns, name)| *ns == backend.namespace && *name == backend.name),
        None => inputs.services.iter().any(|s| {
            text(s, "/metadata/namespace") == backend.namespace
                && text(s, "/metadata/name") == backend.name
        }),
    };
    if exists {
        BackendVerdict::Resolved
    } else {
        BackendVerdict::Unresolved(
            "BackendNotFound",
            format!(
                "backendRef {target}: {} {:?} not found",
                backend.kind, backend.name
            ),
        )
    }
}

/// Decides every route with a parent on one of `gateways` and counts attachments on their
/// listeners.
pub fn routes(inputs: &Inputs, gateways: &mut [GatewayState]) -> Vec<RouteState> {
    let objects = inputs
        .http_routes
        .iter()
        .map(|r| (RouteKind::Http, r))
        .chain(inputs.grpc_routes.iter().map(|r| (RouteKind::Grpc, r)));
    let mut out = Vec::new();
    for (kind, object) in objects {
        let route = objects::route(kind, object);
        let parents: Vec<ParentVerdict> = route
            .parents
            .iter()
            .filter(|p| p.group == GROUP && p.kind == "Gateway")
            .filter_map(|parent| {
                let key: Key = (parent.namespace.clone(), parent.name.clone());
                let gateway = gateways.iter().position(|g| g.key == key)?;
                Some(ParentVerdict {
                    parent: parent.clone(),
                    gateway,
                    accepted: attach(&route, parent, &gateways[gateway], &inputs.namespaces),
                })
            })
            .collect();
        if parents.is_empty() {
            continue;
        }
        for parent in &parents {
            if let Ok(listeners) = &parent.accepted {
                for &l in listeners {
                    gateways[parent.gateway].listeners[l].attached_routes += 1;
                }
            }
        }
        let backends = route
            .rules
            .iter()
            .map(|rule: &Rule| {
                rule.backends
                    .iter()
                    .map(|b| resolve(&route, b, inputs))
                    .collect()
            })
            .collect();
        out.push(RouteState {
            route,
            parents,
            backends,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{CONTROLLER_NAME, Model};

    fn inputs() -> Inputs {
        Inputs {
            classes: vec![json!({"metadata": {"name": "tessera"},
                "spec": {"controllerName": CONTROLLER_NAME}})],
            gateways: vec![json!({
                "metadata": {"namespace": "infra", "name": "gw", "generation": 1},
                "spec": {"gatewayClassName": "tessera", "listeners": [
                    {"name": "same", "port": 80, "protocol": "HTTP"},
                    {"name": "all", "port": 8080, "protocol": "HTTP", "hostname": "*.example.com",
                     "allowedRoutes": {"namespaces": {"from": "All"}}},
                    {"name": "selected", "port": 9090, "protocol": "HTTP",
                     "allowedRoutes": {"namespaces": {"from": "Selector",
                        "selector": {"matchLabels": {"gateway-access": "yes"}}},
                        "kinds": [{"kind": "GRPCRoute"}]}},
                ]}
            })],
            namespaces: vec![
                json!({"metadata": {"name": "infra"}}),
                json!({"metadata": {"name": "apps", "labels": {"gateway-access": "yes"}}}),
                json!({"metadata": {"name": "other"}}),
            ],
            services: vec![
                json!({"metadata": {"namespace": "apps", "name": "web"}}),
                json!({"metadata": {"namespace": "infra", "name": "web"}}),
                json!({"metadata": {"namespace": "backends", "name": "db"}}),
            ],
            ..Inputs::default()
        }
    }

    fn http_route(namespace: &str, parent: Value, hostnames: Value, backends: Value) -> Value {
        json!({"metadata": {"namespace": namespace, "name": "r", "generation": 2},
               "spec": {"parentRefs": [parent], "hostnames": hostnames,
                        "rules": [{"backendRefs": backends}]}})
    }

    #[test]
    fn parents_attach_or_say_why_not() {
        let web = json!([{"name": "web", "port": 80}]);
        // (route namespace, parentRef, hostnames, listeners attached or the reason)
        type Case = (
            &'static str,
            Value,
            Value,
            Result<Vec<&'static str>, &'static str>,
        );
        let table: Vec<Case> = vec![
            (
                "infra",
                json!({"name": "gw"}),
                json!([]),
                Ok(vec!["same", "all"]),
            ),
            (
                "apps",
                json!({"name": "gw", "namespace": "infra"}),
                json!([]),
                Ok(vec!["all"]),
            ),
            (
                "infra",
                json!({"name": "gw", "sectionName": "same"}),
                json!([]),
                Ok(vec!["same"]),
            ),
            (
                "infra",
                json!({"name": "gw", "port": 8080}),
                json!([]),
                Ok(vec!["all"]),
            ),
            (
                "infra",
                json!({"name": "gw", "sectionName": "nope"}),
                json!([]),
                Err("NoMatchingParent"),
            ),
            (
                "infra",
                json!({"name": "gw", "port": 81}),
                json!([]),
                Err("NoMatchingParent"),
            ),
            (
                "apps",
                json!({"name": "gw", "namespace": "infra", "sectionName": "same"}),
                json!([]),
                Err("NotAllowedByListeners"),
            ),
            // The Selector listener allows apps, but only GRPCRoutes.
            (
                "apps",
                json!({"name": "gw", "namespace": "infra", "sectionName": "selected"}),
                json!([]),
                Err("NotAllowedByListeners"),
            ),
            (
                "infra",
                json!({"name": "gw", "sectionName": "all"}),
                json!(["foo.other.com"]),
                Err("NoMatchingListenerHostname"),
            ),
            (
                "infra",
                json!({"name": "gw"}),
                json!(["foo.example.com"]),
                Ok(vec!["same", "all"]),
            ),
            (
                "infra",
                json!({"name": "gw"}),
                json!(["example.com"]),
                Ok(vec!["same"]),
            ),
        ];
        for (namespace, parent, hostnames, want) in table {
            let mut inputs = inputs();
            inputs.http_routes = vec![http_route(
                namespace,
                parent.clone(),
                hostnames.clone(),
                web.clone(),
            )];
            let model = Model::build(&inputs);
            let route = &model.routes[0];
            let got = route.parents[0].accepted.as_ref().map(|ls| {
                ls.iter()
                    .map(|&l| model.gateways[0].listeners[l].name.as_str())
                    .collect::<Vec<_>>()
            });
            let got = got.map_err(|e| e.0);
            assert_eq!(got, want, "{namespace} {parent} {hostnames}");
        }
    }

    #[test]
    fn grpc_routes_use_the_selector_listener() {
        let mut inputs = inputs();
        inputs.grpc_routes = vec![json!({"metadata": {"namespace": "apps", "name": "g"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": "selected"}],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}})];
        inputs.namespaces[1]["metadata"]["labels"] = json!({"gateway-access": "yes"});
        let model = Model::build(&inputs);
        assert_eq!(model.routes[0].parents[0].accepted, Ok(vec![2]));
        assert_eq!(model.gateways[0].listeners[2].attached_routes, 1);
        // Without the label the namespace is not selected.
        inputs.namespaces[1]["metadata"]["labels"] = json!({});
        let model = Model::build(&inputs);
        assert_eq!(
            model.routes[0].parents[0]
                .accepted
                .as_ref()
                .map_err(|e| e.0),
            Err("NotAllowedByListeners")
        );
    }

    #[test]
    fn backend_references_resolve_or_say_why_not() {
        let grant = json!({"metadata": {"namespace": "backends", "name": "allow-apps"},
            "spec": {"from": [{"group": GROUP, "kind": "HTTPRoute", "namespace": "apps"}],
                     "to": [{"group": "", "kind": "Service"}]}});
        let named_grant = json!({"metadata": {"namespace": "backends", "name": "allow-other"},
            "spec": {"from": [{"group": GROUP, "kind": "HTTPRoute", "namespace": "apps"}],
                     "to": [{"group": "", "kind": "Service", "name": "other"}]}});
        // (backendRef, grants, verdict reason)
        let table: Vec<(Value, Vec<Value>, Option<&str>)> = vec![
            (json!({"name": "web", "port": 80}), vec![], None),
            (
                json!({"name": "missing", "port": 80}),
                vec![],
                Some("BackendNotFound"),
            ),
            (
                json!({"group": "example.com", "kind": "Bucket", "name": "web"}),
                vec![],
                Some("InvalidKind"),
            ),
            (
                json!({"name": "db", "namespace": "backends", "port": 5432}),
                vec![],
                Some("RefNotPermitted"),
            ),
            (
                json!({"name": "db", "namespace": "backends", "port": 5432}),
                vec![grant.clone()],
                None,
            ),
            (
                json!({"name": "db", "namespace": "backends", "port": 5432}),
                vec![named_grant],
                Some("RefNotPermitted"),
            ),
            (
                json!({"name": "gone", "namespace": "backends", "port": 5432}),
                vec![grant],
                Some("BackendNotFound"),
            ),
            (
                json!({"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "pool"}),
                vec![],
                None,
            ),
            (
                json!({"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "nope"}),
                vec![],
                Some("BackendNotFound"),
            ),
        ];
        for (backend, grants, want) in table {
            let mut inputs = inputs();
            inputs.reference_grants = grants;
            inputs.extra_backends = vec![ExtraBackendKind {
                group: "inference.networking.k8s.io".into(),
                kind: "InferencePool".into(),
                port_required: false,
                objects: vec![("apps".into(), "pool".into())],
            }];
            inputs.http_routes = vec![http_route(
                "apps",
                json!({"name": "gw", "namespace": "infra"}),
                json!([]),
                json!([backend.clone()]),
            )];
            let model = Model::build(&inputs);
            let got = model.routes[0].resolved_refs().map_err(|e| e.0).err();
            assert_eq!(got, want, "{backend}");
        }
    }

    #[test]
    fn routes_to_other_controllers_gateways_are_ignored() {
        let mut inputs = inputs();
        inputs
            .gateways
            .push(json!({"metadata": {"namespace": "infra", "name": "theirs"},
            "spec": {"gatewayClassName": "someone-else",
                     "listeners": [{"name": "x", "port": 80, "protocol": "HTTP"}]}}));
        inputs.http_routes = vec![http_route(
            "infra",
            json!({"name": "theirs"}),
            json!([]),
            json!([{"name": "web", "port": 80}]),
        )];
        let model = Model::build(&inputs);
        assert!(model.routes.is_empty());
        assert_eq!(model.gateways.len(), 1);
    }
}
