//! The status objects the decisions become, as gateway-api's types define them: GatewayClass
//! `Accepted`; Gateway `Accepted`/`Programmed`, `addresses` and per listener
//! `supportedKinds`, `attachedRoutes` and `Accepted`/`Conflicted`/`ResolvedRefs`/`Programmed`;
//! a route's `parents[]` entries for Tessera's controllerName with `Accepted` and
//! `ResolvedRefs`. Every condition carries the object's `observedGeneration`; a condition's
//! `lastTransitionTime` moves only when its status does.
//!
//! Each function takes the stored object and the time as text, and returns the whole next
//! `status`, or `None` when the object is not Tessera's to write. Route entries of other
//! controllers are kept as they are.

use serde_json::{Value, json};
use tessera_model::conditions;
use tessera_model::json::text;

use crate::gateway::{ListenerState, kind_entry};
use crate::objects::{Key, RouteKind, key};
use crate::{CONTROLLER_NAME, Model};

fn previous_conditions(status: Option<&Value>) -> Vec<Value> {
    status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Sets one condition with `observedGeneration`.
fn set(
    conditions: &mut Vec<Value>,
    kind: &str,
    outcome: Result<(&str, String), (&str, String)>,
    generation: i64,
    now: &str,
) {
    let (status, reason, message) = match outcome {
        Ok((reason, message)) => ("True", reason, message),
        Err((reason, message)) => ("False", reason, message),
    };
    conditions::set(conditions, kind, status, reason, &message, now);
    if let Some(c) = conditions.iter_mut().find(|c| c["type"] == kind) {
        c["observedGeneration"] = json!(generation);
    }
}

/// Like [`set`] for a condition that is True when something is wrong (`Conflicted`).
fn set_raised(
    conditions: &mut Vec<Value>,
    kind: &str,
    raised: Option<(&str, String)>,
    otherwise: (&str, String),
    generation: i64,
    now: &str,
) {
    let (status, (reason, message)) = match raised {
        Some(r) => ("True", r),
        None => ("False", otherwise),
    };
    conditions::set(conditions, kind, status, reason, &message, now);
    if let Some(c) = conditions.iter_mut().find(|c| c["type"] == kind) {
        c["observedGeneration"] = json!(generation);
    }
}

/// The next status of a GatewayClass, `None` when another controller owns it.
pub fn class_status(model: &Model, class: &Value, now: &str) -> Option<Value> {
    let name = text(class, "/metadata/name");
    let verdict = model.classes.iter().find(|c| c.name == name)?;
    let mut status = class.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut conds = previous_conditions(class.get("status"));
    let outcome = match &verdict.accepted {
        Ok(()) => Ok((
            "Accepted",
            format!("GatewayClass is accepted by {CONTROLLER_NAME}"),
        )),
        Err((reason, message)) => Err((*reason, message.clone())),
    };
    set(&mut conds, "Accepted", outcome, verdict.generation, now);
    status["conditions"] = Value::Array(conds);
    Some(status)
}

fn listener_status(
    listener: &ListenerState,
    previous: Option<&Value>,
    address: bool,
    generation: i64,
    now: &str,
) -> Value {
    let mut conds = previous_conditions(previous);
    let accepted = if let Some((reason, message)) = &listener.unsupported {
        Err((*reason, message.clone()))
    } else if let Some((reason, message)) = &listener.conflict {
        Err((*reason, message.clone()))
    } else {
        Ok(("Accepted", "Listener is accepted".to_string()))
    };
    set(&mut conds, "Accepted", accepted, generation, now);
    set_raised(
        &mut conds,
        "Conflicted",
        listener.conflict.as_ref().map(|(r, m)| (*r, m.clone())),
        ("NoConflicts", "No conflicts".to_string()),
        generation,
        now,
    );
    let resolved = if listener.invalid_kinds.is_empty() {
        Ok(("ResolvedRefs", "All references are resolved".to_string()))
    } else {
        Err((
            "InvalidRouteKinds",
            format!(
                "allowedRoutes.kinds: not supported: {}",
                listener.invalid_kinds.join(", ")
            ),
        ))
    };
    set(&mut conds, "ResolvedRefs", resolved, generation, now);
    let programmed = if listener.usable() && address {
        Ok(("Programmed", "Listener is programmed".to_string()))
    } else if !listener.usable() {
        Err(("Invalid", "Listener is not accepted".to_string()))
    } else {
        Err(("Pending", "The Gateway has no address".to_string()))
    };
    set(&mut conds, "Programmed", programmed, generation, now);
    json!({
        "name": listener.name,
        "supportedKinds": listener.kinds.iter().map(|k| kind_entry(*k)).collect::<Vec<_>>(),
        "attachedRoutes": listener.attached_routes,
        "conditions": conds,
    })
}

/// The next status of a Gateway, `None` when it is not of a Tessera class.
pub fn gateway_status(model: &Model, gateway: &Value, now: &str) -> Option<Value> {
    let state = model.gateway(&key(gateway))?;
    let generation = state.generation;
    let previous = gateway.get("status");
    let mut status = previous.cloned().unwrap_or_else(|| json!({}));
    let mut conds = previous_conditions(previous);
    let valid = state.listeners.iter().filter(|l| l.usable()).count();
    let accepted = if !state.class_accepted {
        Err((
            "Pending",
            format!("GatewayClass {:?} is not accepted", state.class),
        ))
    } else if let Some(("AddressNotUsable", message)) =
        state.address_problem.as_ref().map(|(r, m)| (*r, m))
        && message.contains(".type:")
    {
        Err(("UnsupportedAddress", message.clone()))
    } else if valid == state.listeners.len() {
        Ok(("Accepted", "Gateway is accepted".to_string()))
    } else if valid > 0 {
        Ok((
            "ListenersNotValid",
            format!(
                "{} of {} listeners are not valid",
                state.listeners.len() - valid,
                state.listeners.len()
            ),
        ))
    } else {
        Err(("ListenersNotValid", "No listener is valid".to_string()))
    };
    set(&mut conds, "Accepted", accepted, generation, now);
    let programmed = if state.programmed() {
        Ok(("Programmed", "Gateway is programmed".to_string()))
    } else if let Some((reason, message)) = &state.address_problem {
        Err((*reason, message.clone()))
    } else if !state.class_accepted {
        Err(("Pending", "Waiting for the GatewayClass".to_string()))
    } else {
        Err(("Invalid", "No listener is valid".to_string()))
    };
    set(&mut conds, "Programmed", programmed, generation, now);
    status["conditions"] = Value::Array(conds);
    status["addresses"] = match state.address {
        Some(address) => json!([{"type": "IPAddress", "value": address.to_string()}]),
        None => json!([]),
    };
    let previous_listeners = previous
        .and_then(|s| s.get("listeners"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    status["listeners"] = Value::Array(
        state
            .listeners
            .iter()
            .map(|l| {
                let prev = previous_listeners
                    .iter()
                    .find(|p| p["name"] == l.name.as_str());
                listener_status(l, prev, state.address.is_some(), generation, now)
            })
            .collect(),
    );
    Some(status)
}

/// The next status of a route of `kind`: Tessera's entries replaced (or dropped when the
/// route no longer names a Tessera Gateway), other controllers' kept. `None` when there is
/// nothing of Tessera's to write or remove.
pub fn route_status(model: &Model, kind: RouteKind, route: &Value, now: &str) -> Option<Value> {
    let route_key: Key = key(route);
    let state = model
        .routes
        .iter()
        .find(|r| r.route.kind == kind && r.route.key == route_key);
    let previous = route.get("status");
    let previous_parents: Vec<Value> = previous
        .and_then(|s| s.get("parents"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ours = |p: &Value| text(p, "/controllerName") == CONTROLLER_NAME;
    if state.is_none() && !previous_parents.iter().any(ours) {
        return None;
    }
    let mut parents: Vec<Value> = previous_parents
        .iter()
        .filter(|p| !ours(p))
        .cloned()
        .collect();
    if let Some(state) = state {
        let generation = state.route.generation;
        let resolved = state.resolved_refs();
        for verdict in &state.parents {
            let prev = previous_parents
                .iter()
                .find(|p| ours(p) && p["parentRef"] == verdict.parent.raw);
            let mut conds = previous_conditions(prev);
            let accepted = match &verdict.accepted {
                Ok(_) => Ok(("Accepted", "Route is accepted".to_string())),
                Err((reason, message)) => Err((*reason, message.clone())),
            };
            set(&mut conds, "Accepted", accepted, generation, now);
            let refs = match &resolved {
                Ok(()) => Ok(("ResolvedRefs", "All references are resolved".to_string())),
                Err((reason, message)) => Err((*reason, message.clone())),
            };
            set(&mut conds, "ResolvedRefs", refs, generation, now);
            parents.push(json!({
                "parentRef": verdict.parent.raw,
                "controllerName": CONTROLLER_NAME,
                "conditions": conds,
            }));
        }
    }
    let mut status = previous.cloned().unwrap_or_else(|| json!({}));
    status["parents"] = Value::Array(parents);
    Some(status)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Inputs;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:01:00Z";

    fn condition<'a>(conds: &'a Value, kind: &str) -> (&'a str, &'a str) {
        let c = conds
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
            .unwrap_or(&Value::Null);
        (text(c, "/status"), text(c, "/reason"))
    }

    fn inputs() -> Inputs {
        Inputs {
            classes: vec![
                json!({"metadata": {"name": "tessera", "generation": 4},
                       "spec": {"controllerName": CONTROLLER_NAME}}),
                json!({"metadata": {"name": "other"},
                       "spec": {"controllerName": "example.com/x"},
                       "status": {"conditions": [{"type": "Accepted", "status": "True"}]}}),
            ],
            gateways: vec![json!({
                "metadata": {"namespace": "infra", "name": "gw", "generation": 2},
                "spec": {"gatewayClassName": "tessera", "listeners": [
                    {"name": "http", "port": 80, "protocol": "HTTP"},
                    {"name": "dup", "port": 80, "protocol": "HTTPS", "hostname": "a.com"},
                    {"name": "tcp", "port": 9000, "protocol": "TCP"},
                    {"name": "alt", "port": 8080, "protocol": "HTTP"},
                ]}
            })],
            services: vec![json!({"metadata": {"namespace": "infra", "name": "web"}})],
            ..Inputs::default()
        }
    }

    #[test]
    fn class_status_is_written_for_tessera_classes_only() {
        let inputs = inputs();
        let model = Model::build(&inputs);
        let status = class_status(&model, &inputs.classes[0], T0).expect("ours");
        assert_eq!(
            condition(&status["conditions"], "Accepted"),
            ("True", "Accepted")
        );
        assert_eq!(status["conditions"][0]["observedGeneration"], 4);
        assert_eq!(class_status(&model, &inputs.classes[1], T0), None);
    }

    #[test]
    fn gateway_status_shows_listeners_conflicts_and_address() {
        let inputs = inputs();
        let model = Model::build(&inputs);
        let status = gateway_status(&model, &inputs.gateways[0], T0).expect("ours");
        assert_eq!(
            condition(&status["conditions"], "Accepted"),
            ("True", "ListenersNotValid")
        );
        assert_eq!(
            condition(&status["conditions"], "Programmed"),
            ("True", "Programmed")
        );
        assert_eq!(
            status["addresses"],
            json!([{"type": "IPAddress", "value": "172.18.255.1"}])
        );
        let listeners = &status["listeners"];
        assert_eq!(
            condition(&listeners[0]["conditions"], "Conflicted"),
            ("True", "ProtocolConflict")
        );
        assert_eq!(
            condition(&listeners[0]["conditions"], "Programmed"),
            ("False", "Invalid")
        );
        assert_eq!(
            condition(&listeners[2]["conditions"], "Accepted"),
            ("False", "UnsupportedProtocol")
        );
        assert_eq!(listeners[2]["supportedKinds"], json!([]));
        assert_eq!(
            condition(&listeners[3]["conditions"], "Accepted"),
            ("True", "Accepted")
        );
        assert_eq!(
            condition(&listeners[3]["conditions"], "Conflicted"),
            ("False", "NoConflicts")
        );
        assert_eq!(
            condition(&listeners[3]["conditions"], "Programmed"),
            ("True", "Programmed")
        );
        assert_eq!(
            listeners[3]["supportedKinds"],
            json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"},
                   {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"}])
        );
        assert_eq!(listeners[3]["attachedRoutes"], 0);
        assert_eq!(listeners[3]["conditions"][0]["observedGeneration"], 2);
    }

    #[test]
    fn route_status_keeps_other_controllers_and_transition_times() {
        let mut inputs = inputs();
        let mut route = json!({"metadata": {"namespace": "infra", "name": "r", "generation": 7},
            "spec": {"parentRefs": [{"name": "gw"}],
                     "rules": [{"backendRefs": [{"name": "missing", "port": 80}]}]},
            "status": {"parents": [{"parentRef": {"name": "mesh"},
                "controllerName": "example.com/mesh", "conditions": []}]}});
        inputs.http_routes = vec![route.clone()];
        let model = Model::build(&inputs);
        let status = route_status(&model, RouteKind::Http, &route, T0).expect("ours");
        let parents = status["parents"].as_array().expect("parents");
        assert_eq!(parents.len(), 2);
        assert_eq!(parents[0]["controllerName"], "example.com/mesh");
        assert_eq!(parents[1]["controllerName"], CONTROLLER_NAME);
        assert_eq!(parents[1]["parentRef"], json!({"name": "gw"}));
        assert_eq!(
            condition(&parents[1]["conditions"], "Accepted"),
            ("True", "Accepted")
        );
        assert_eq!(
            condition(&parents[1]["conditions"], "ResolvedRefs"),
            ("False", "BackendNotFound")
        );
        assert_eq!(parents[1]["conditions"][0]["observedGeneration"], 7);
        assert_eq!(model.gateways[0].listeners[3].attached_routes, 1);
        // A later pass with the Service present: ResolvedRefs moves, Accepted keeps its time.
        route["status"] = status;
        inputs
            .services
            .push(json!({"metadata": {"namespace": "infra", "name": "missing"}}));
        inputs.http_routes = vec![route.clone()];
        let model = Model::build(&inputs);
        let status = route_status(&model, RouteKind::Http, &route, T1).expect("ours");
        let ours = &status["parents"][1]["conditions"];
        assert_eq!(condition(ours, "ResolvedRefs"), ("True", "ResolvedRefs"));
        let time = |kind: &str| {
            ours.as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
                .map(|c| text(c, "/lastTransitionTime").to_string())
        };
        assert_eq!(time("Accepted").as_deref(), Some(T0));
        assert_eq!(time("ResolvedRefs").as_deref(), Some(T1));
        // The route moves to another controller's Gateway: Tessera's entry goes.
        route["spec"]["parentRefs"] = json!([{"name": "mesh"}]);
        route["status"] = status;
        inputs.http_routes = vec![route.clone()];
        let model = Model::build(&inputs);
        let status = route_status(&model, RouteKind::Http, &route, T1).expect("removal");
        assert_eq!(status["parents"].as_array().map(Vec::len), Some(1));
        route["status"] = status;
        assert_eq!(route_status(&model, RouteKind::Http, &route, T1), None);
    }
}
