//! Table tests after upstream's `binder_test.go`, `provision_test.go` and `delete_test.go`: an
//! initial set of objects, one sync, then the objects as the actions leave them and the
//! events recorded.

use super::*;
use crate::testing::with;

#[derive(Clone, Default)]
struct World {
    volumes: Vec<Value>,
    claims: Vec<Value>,
    classes: Vec<Value>,
    pods: Vec<Value>,
}

/// What one sync left: the objects, the events as (reason, message), the claims to sync.
struct After {
    world: World,
    events: Vec<(String, String)>,
    requeued: Vec<String>,
}

enum Subject {
    Claim(&'static str),
    Volume(&'static str),
}

fn replace(list: &mut [Value], object: Value) {
    let at = list
        .iter()
        .position(|o| name(o) == name(&object) && namespace(o) == namespace(&object))
        .expect("updated object exists");
    list[at] = object;
}

fn run(world: &World, subject: &Subject) -> Result<After, SyncError> {
    let cluster = Cluster {
        volumes: &world.volumes,
        claims: &world.claims,
        classes: &world.classes,
        pods: &world.pods,
    };
    let actions = match subject {
        Subject::Claim(wanted) => {
            let claim = world
                .claims
                .iter()
                .find(|c| name(c) == *wanted)
                .expect("claim");
            sync_claim(claim, cluster)?
        }
        Subject::Volume(wanted) => {
            let volume = by_name(&world.volumes, wanted).expect("volume");
            sync_volume(volume, cluster)?
        }
    };
    let mut after = After {
        world: world.clone(),
        events: Vec::new(),
        requeued: Vec::new(),
    };
    for action in actions {
        match action {
            Action::UpdateClaim(claim) | Action::UpdateClaimStatus(claim) => {
                replace(&mut after.world.claims, claim)
            }
            Action::UpdateVolume(volume) | Action::UpdateVolumeStatus(volume) => {
                replace(&mut after.world.volumes, volume)
            }
            Action::DeleteVolume(gone) => after.world.volumes.retain(|v| name(v) != gone),
            Action::Event(event) => after.events.push((event.reason.into(), event.message)),
            Action::SyncClaim(key) => after.requeued.push(key),
        }
    }
    Ok(after)
}

fn volume(name: &str, size: &str) -> Value {
    json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain"},
        "status": {"phase": "Available"}
    })
}

fn claim(name: &str, size: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Pending"}
    })
}

fn bound_to(volume: Value, claim: &str) -> Value {
    with(
        volume,
        &[
            (
                "/spec/claimRef",
                json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                "namespace": "default", "name": claim, "uid": format!("uid-{claim}")}),
            ),
            ("/status/phase", json!("Bound")),
        ],
    )
}

fn claim_bound_to(claim: Value, volume: &str) -> Value {
    with(
        claim,
        &[
            ("/spec/volumeName", json!(volume)),
            ("/metadata/annotations", json!({ANN_BIND_COMPLETED: "yes"})),
            ("/status/phase", json!("Bound")),
        ],
    )
}

fn class(name: &str, provisioner: &str, mode: &str) -> Value {
    json!({"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode,
           "reclaimPolicy": "Delete"})
}

/// (object kind, name, pointer, expected value) in the world after the sync.
type Check = (&'static str, &'static str, &'static str, Value);

fn check(after: &After, case: &str, checks: &[Check]) {
    for (kind, wanted, pointer, value) in checks {
        let list = if *kind == "pv" {
            &after.world.volumes
        } else {
            &after.world.claims
        };
        let object = list.iter().find(|o| name(o) == *wanted);
        let got = match object {
            Some(object) => object.pointer(pointer).cloned().unwrap_or(Value::Null),
            None => json!("<gone>"),
        };
        assert_eq!(&got, value, "{case}: {kind} {wanted} {pointer}");
    }
}

struct Case {
    name: &'static str,
    world: World,
    subject: Subject,
    checks: Vec<Check>,
    events: Vec<(&'static str, &'static str)>,
}

fn run_table(cases: Vec<Case>) {
    for case in cases {
        let after =
            run(&case.world, &case.subject).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        check(&after, case.name, &case.checks);
        let events: Vec<(&str, &str)> = after
            .events
            .iter()
            .map(|(r, m)| (r.as_str(), m.as_str()))
            .collect();
        assert_eq!(events, case.events, "{}: events", case.name);
    }
}

#[test]
fn sync_unbound_claim() {
    let world = |volumes: Vec<Value>, claims: Vec<Value>| World {
        volumes,
        claims,
        ..World::default()
    };
    run_table(vec![
        Case {
            name: "1-1 binds to a matching unbound volume",
            world: world(
                vec![volume("volume1-1", "10Gi")],
                vec![claim("claim1-1", "1Gi")],
            ),
            subject: Subject::Claim("claim1-1"),
            checks: vec![
                (
                    "pv",
                    "volume1-1",
                    "/spec/claimRef/uid",
                    json!("uid-claim1-1"),
                ),
                (
                    "pv",
                    "volume1-1",
                    "/metadata/annotations/pv.kubernetes.io~1bound-by-controller",
                    json!("yes"),
                ),
                ("pv", "volume1-1", "/status/phase", json!("Bound")),
                ("pvc", "claim1-1", "/spec/volumeName", json!("volume1-1")),
                (
                    "pvc",
                    "claim1-1",
                    "/metadata/annotations/pv.kubernetes.io~1bind-completed",
                    json!("yes"),
                ),
                (
                    "pvc",
                    "claim1-1",
                    "/metadata/annotations/pv.kubernetes.io~1bound-by-controller",
                    json!("yes"),
                ),
                ("pvc", "claim1-1", "/status/phase", json!("Bound")),
                (
                    "pvc",
                    "claim1-1",
                    "/status/capacity",
                    json!({"storage": "10Gi"}),
                ),
                (
                    "pvc",
                    "claim1-1",
                    "/status/accessModes",
                    json!(["ReadWriteOnce"]),
                ),
            ],
            events: vec![],
        },
        Case {
            name: "1-2 no matching volume and no class",
            world: world(
                vec![volume("volume1-2", "1Gi")],
                vec![claim("claim1-2", "10Gi")],
            ),
            subject: Subject::Claim("claim1-2"),
            checks: vec![
                ("pv", "volume1-2", "/status/phase", json!("Available")),
                ("pvc", "claim1-2", "/status/phase", json!("Pending")),
                ("pvc", "claim1-2", "/spec/volumeName", Value::Null),
            ],
            events: vec![(
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )],
        },
        Case {
            name: "1-3 binds to a volume pre-bound to it, without bound-by-controller on the volume",
            world: world(
                vec![
                    volume("small", "1Gi"),
                    with(
                        volume("volume1-3", "10Gi"),
                        &[(
                            "/spec/claimRef",
                            json!({"namespace": "default", "name": "claim1-3"}),
                        )],
                    ),
                ],
                vec![claim("claim1-3", "1Gi")],
            ),
            subject: Subject::Claim("claim1-3"),
            checks: vec![
                (
                    "pv",
                    "volume1-3",
                    "/spec/claimRef/uid",
                    json!("uid-claim1-3"),
                ),
                ("pv", "volume1-3", "/metadata/annotations", Value::Null),
                ("pv", "small", "/status/phase", json!("Available")),
                ("pvc", "claim1-3", "/spec/volumeName", json!("volume1-3")),
                ("pvc", "claim1-3", "/status/capacity/storage", json!("10Gi")),
            ],
            events: vec![],
        },
        Case {
            name: "2-1 claim pre-bound to a volume that does not exist stays Pending",
            world: world(
                vec![],
                vec![with(
                    claim("claim2-1", "1Gi"),
                    &[("/spec/volumeName", json!("nothing"))],
                )],
            ),
            subject: Subject::Claim("claim2-1"),
            checks: vec![("pvc", "claim2-1", "/status/phase", json!("Pending"))],
            events: vec![],
        },
        Case {
            name: "2-3 claim pre-bound to an unbound volume binds without bound-by-controller",
            world: world(
                vec![volume("volume2-3", "10Gi")],
                vec![with(
                    claim("claim2-3", "1Gi"),
                    &[("/spec/volumeName", json!("volume2-3"))],
                )],
            ),
            subject: Subject::Claim("claim2-3"),
            checks: vec![
                ("pv", "volume2-3", "/spec/claimRef/name", json!("claim2-3")),
                (
                    "pv",
                    "volume2-3",
                    "/metadata/annotations/pv.kubernetes.io~1bound-by-controller",
                    json!("yes"),
                ),
                (
                    "pvc",
                    "claim2-3",
                    "/metadata/annotations/pv.kubernetes.io~1bound-by-controller",
                    Value::Null,
                ),
                (
                    "pvc",
                    "claim2-3",
                    "/metadata/annotations/pv.kubernetes.io~1bind-completed",
                    json!("yes"),
                ),
                ("pvc", "claim2-3", "/status/phase", json!("Bound")),
            ],
            events: vec![],
        },
        Case {
            name: "2-4 claim pre-bound to a volume too small gets VolumeMismatch",
            world: world(
                vec![volume("volume2-4", "1Gi")],
                vec![with(
                    claim("claim2-4", "10Gi"),
                    &[("/spec/volumeName", json!("volume2-4"))],
                )],
            ),
            subject: Subject::Claim("claim2-4"),
            checks: vec![
                ("pv", "volume2-4", "/spec/claimRef", Value::Null),
                ("pvc", "claim2-4", "/status/phase", json!("Pending")),
            ],
            events: vec![(
                "VolumeMismatch",
                "Cannot bind to requested volume \"volume2-4\": requested PV is too small",
            )],
        },
        Case {
            name: "2-4b claim pre-bound to a volume of another attributes class",
            world: world(
                vec![volume("volume2-4", "10Gi")],
                vec![with(
                    claim("claim2-4", "1Gi"),
                    &[
                        ("/spec/volumeName", json!("volume2-4")),
                        ("/spec/volumeAttributesClassName", json!("gold")),
                    ],
                )],
            ),
            subject: Subject::Claim("claim2-4"),
            checks: vec![("pvc", "claim2-4", "/status/phase", json!("Pending"))],
            events: vec![(
                "VolumeMismatch",
                "Cannot bind to requested volume \"volume2-4\": volumeAttributesClassName does not match",
            )],
        },
        Case {
            name: "1-4 binding records the volume's attributes class on the claim",
            world: world(
                vec![with(
                    volume("volume1-4", "10Gi"),
                    &[("/spec/volumeAttributesClassName", json!("gold"))],
                )],
                vec![with(
                    claim("claim1-4", "1Gi"),
                    &[("/spec/volumeAttributesClassName", json!("gold"))],
                )],
            ),
            subject: Subject::Claim("claim1-4"),
            checks: vec![
                ("pvc", "claim1-4", "/spec/volumeName", json!("volume1-4")),
                (
                    "pvc",
                    "claim1-4",
                    "/status/currentVolumeAttributesClassName",
                    json!("gold"),
                ),
            ],
            events: vec![],
        },
        Case {
            name: "2-5 claim pre-bound to a volume bound elsewhere waits",
            world: world(
                vec![bound_to(volume("volume2-5", "10Gi"), "other")],
                vec![with(
                    claim("claim2-5", "1Gi"),
                    &[("/spec/volumeName", json!("volume2-5"))],
                )],
            ),
            subject: Subject::Claim("claim2-5"),
            checks: vec![
                ("pv", "volume2-5", "/spec/claimRef/name", json!("other")),
                ("pvc", "claim2-5", "/status/phase", json!("Pending")),
            ],
            events: vec![(
                "FailedBinding",
                "volume \"volume2-5\" already bound to a different claim.",
            )],
        },
    ]);
}

#[test]
fn sync_bound_claim() {
    let world = |volumes: Vec<Value>, claims: Vec<Value>| World {
        volumes,
        claims,
        ..World::default()
    };
    run_table(vec![
        Case {
            name: "3-1 bound claim without volumeName is Lost",
            world: world(
                vec![],
                vec![with(
                    claim("claim3-1", "1Gi"),
                    &[
                        ("/metadata/annotations", json!({ANN_BIND_COMPLETED: "yes"})),
                        (
                            "/status",
                            json!({"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}),
                        ),
                    ],
                )],
            ),
            subject: Subject::Claim("claim3-1"),
            checks: vec![("pvc", "claim3-1", "/status", json!({"phase": "Lost"}))],
            events: vec![(
                "ClaimLost",
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            )],
        },
        Case {
            name: "3-2 bound claim whose volume is gone is Lost",
            world: world(
                vec![],
                vec![claim_bound_to(claim("claim3-2", "1Gi"), "volume3-2")],
            ),
            subject: Subject::Claim("claim3-2"),
            checks: vec![("pvc", "claim3-2", "/status/phase", json!("Lost"))],
            events: vec![(
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            )],
        },
        Case {
            name: "3-2b a claim already Lost records nothing again",
            world: world(
                vec![],
                vec![with(
                    claim_bound_to(claim("claim3-2", "1Gi"), "volume3-2"),
                    &[("/status/phase", json!("Lost"))],
                )],
            ),
            subject: Subject::Claim("claim3-2"),
            checks: vec![("pvc", "claim3-2", "/status/phase", json!("Lost"))],
            events: vec![],
        },
        Case {
            name: "3-3 bound claim whose volume came unbound binds it again",
            world: world(
                vec![with(
                    volume("volume3-3", "10Gi"),
                    &[("/status/phase", json!("Available"))],
                )],
                vec![claim_bound_to(claim("claim3-3", "1Gi"), "volume3-3")],
            ),
            subject: Subject::Claim("claim3-3"),
            checks: vec![
                (
                    "pv",
                    "volume3-3",
                    "/spec/claimRef/uid",
                    json!("uid-claim3-3"),
                ),
                ("pv", "volume3-3", "/status/phase", json!("Bound")),
                ("pvc", "claim3-3", "/status/phase", json!("Bound")),
            ],
            events: vec![],
        },
        Case {
            name: "3-5 bound claim whose volume names another claim is misbound",
            world: world(
                vec![bound_to(volume("volume3-5", "10Gi"), "other")],
                vec![claim_bound_to(claim("claim3-5", "1Gi"), "volume3-5")],
            ),
            subject: Subject::Claim("claim3-5"),
            checks: vec![("pvc", "claim3-5", "/status/phase", json!("Lost"))],
            events: vec![(
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            )],
        },
    ]);
}

#[test]
fn sync_volume_and_reclaim() {
    let world = |volumes: Vec<Value>, claims: Vec<Value>| World {
        volumes,
        claims,
        ..World::default()
    };
    let orphan = |policy: &str| {
        with(
            bound_to(volume("volume4", "1Gi"), "deleted"),
            &[("/spec/persistentVolumeReclaimPolicy", json!(policy))],
        )
    };
    run_table(vec![
        Case {
            name: "4-1 unbound volume becomes Available",
            world: world(
                vec![with(volume("volume4-1", "1Gi"), &[("/status", json!({}))])],
                vec![],
            ),
            subject: Subject::Volume("volume4-1"),
            checks: vec![("pv", "volume4-1", "/status/phase", json!("Available"))],
            events: vec![],
        },
        Case {
            name: "4-2 volume pre-bound without uid stays Available",
            world: world(
                vec![with(
                    volume("volume4-2", "1Gi"),
                    &[(
                        "/spec/claimRef",
                        json!({"namespace": "default", "name": "c"}),
                    )],
                )],
                vec![],
            ),
            subject: Subject::Volume("volume4-2"),
            checks: vec![("pv", "volume4-2", "/status/phase", json!("Available"))],
            events: vec![],
        },
        Case {
            name: "4-3 Retain: the claim is gone, the volume is Released and kept",
            world: world(vec![orphan("Retain")], vec![]),
            subject: Subject::Volume("volume4"),
            checks: vec![
                ("pv", "volume4", "/status/phase", json!("Released")),
                ("pv", "volume4", "/spec/claimRef/name", json!("deleted")),
            ],
            events: vec![],
        },
        Case {
            name: "4-3b a namesake claim with another uid does not hold the volume",
            world: world(
                vec![orphan("Retain")],
                vec![with(
                    claim("deleted", "1Gi"),
                    &[("/metadata/uid", json!("new-uid"))],
                )],
            ),
            subject: Subject::Volume("volume4"),
            checks: vec![("pv", "volume4", "/status/phase", json!("Released"))],
            events: vec![],
        },
        Case {
            name: "4-4 Delete: the volume is deleted",
            world: world(vec![orphan("Delete")], vec![]),
            subject: Subject::Volume("volume4"),
            checks: vec![("pv", "volume4", "", json!("<gone>"))],
            events: vec![],
        },
        Case {
            name: "4-5 Recycle: no recycler, the volume Failed",
            world: world(vec![orphan("Recycle")], vec![]),
            subject: Subject::Volume("volume4"),
            checks: vec![
                ("pv", "volume4", "/status/phase", json!("Failed")),
                (
                    "pv",
                    "volume4",
                    "/status/message",
                    json!("No recycler plugin found for the volume!"),
                ),
            ],
            events: vec![(
                "VolumeFailedRecycle",
                "No recycler plugin found for the volume!",
            )],
        },
        Case {
            name: "4-5b Recycle: a Failed volume records nothing again",
            world: world(
                vec![with(
                    orphan("Recycle"),
                    &[("/status/phase", json!("Failed"))],
                )],
                vec![],
            ),
            subject: Subject::Volume("volume4"),
            checks: vec![("pv", "volume4", "/status/phase", json!("Failed"))],
            events: vec![],
        },
        Case {
            name: "4-6 unknown policy Failed",
            world: world(vec![orphan("Bogus")], vec![]),
            subject: Subject::Volume("volume4"),
            checks: vec![("pv", "volume4", "/status/phase", json!("Failed"))],
            events: vec![(
                "VolumeUnknownReclaimPolicy",
                "Volume has unrecognized PersistentVolumeReclaimPolicy",
            )],
        },
        Case {
            name: "4-7 volume bound to a pending claim: the claim is synced next",
            world: world(
                vec![bound_to(volume("volume4-7", "1Gi"), "claim4-7")],
                vec![claim("claim4-7", "1Gi")],
            ),
            subject: Subject::Volume("volume4-7"),
            checks: vec![("pv", "volume4-7", "/status/phase", json!("Bound"))],
            events: vec![],
        },
        Case {
            name: "4-8 volume and claim bound: Bound",
            world: world(
                vec![with(
                    bound_to(volume("volume4-8", "1Gi"), "claim4-8"),
                    &[("/status/phase", json!("Available"))],
                )],
                vec![claim_bound_to(claim("claim4-8", "1Gi"), "volume4-8")],
            ),
            subject: Subject::Volume("volume4-8"),
            checks: vec![("pv", "volume4-8", "/status/phase", json!("Bound"))],
            events: vec![],
        },
        Case {
            name: "4-9 bound by the controller to a claim bound elsewhere: unbound",
            world: world(
                vec![with(
                    bound_to(volume("volume4-9", "1Gi"), "claim4-9"),
                    &[(
                        "/metadata/annotations",
                        json!({ANN_BOUND_BY_CONTROLLER: "yes"}),
                    )],
                )],
                vec![claim_bound_to(claim("claim4-9", "1Gi"), "elsewhere")],
            ),
            subject: Subject::Volume("volume4-9"),
            checks: vec![
                ("pv", "volume4-9", "/spec/claimRef", Value::Null),
                ("pv", "volume4-9", "/metadata/annotations", Value::Null),
                ("pv", "volume4-9", "/status/phase", json!("Available")),
            ],
            events: vec![],
        },
        Case {
            name: "4-10 pre-bound by a user to a claim bound elsewhere: keeps the name, loses the uid",
            world: world(
                vec![bound_to(volume("volume4-10", "1Gi"), "claim4-10")],
                vec![claim_bound_to(claim("claim4-10", "1Gi"), "elsewhere")],
            ),
            subject: Subject::Volume("volume4-10"),
            checks: vec![
                (
                    "pv",
                    "volume4-10",
                    "/spec/claimRef/name",
                    json!("claim4-10"),
                ),
                ("pv", "volume4-10", "/spec/claimRef/uid", Value::Null),
                ("pv", "volume4-10", "/status/phase", json!("Available")),
            ],
            events: vec![],
        },
        Case {
            name: "4-11 provisioned for a claim bound elsewhere, Delete: deleted",
            world: world(
                vec![with(
                    bound_to(volume("volume4-11", "1Gi"), "claim4-11"),
                    &[
                        (
                            "/metadata/annotations",
                            json!({"pv.kubernetes.io/provisioned-by": "example.com/p"}),
                        ),
                        ("/spec/persistentVolumeReclaimPolicy", json!("Delete")),
                    ],
                )],
                vec![claim_bound_to(claim("claim4-11", "1Gi"), "elsewhere")],
            ),
            subject: Subject::Volume("volume4-11"),
            checks: vec![("pv", "volume4-11", "", json!("<gone>"))],
            events: vec![],
        },
        Case {
            name: "4-12 volumeMode mismatch with the claim it names",
            world: world(
                vec![with(
                    bound_to(volume("volume4-12", "1Gi"), "claim4-12"),
                    &[("/spec/volumeMode", json!("Block"))],
                )],
                vec![claim("claim4-12", "1Gi")],
            ),
            subject: Subject::Volume("volume4-12"),
            checks: vec![],
            events: vec![
                (
                    "VolumeMismatch",
                    "Cannot bind PersistentVolume to requested PersistentVolumeClaim \"claim4-12\" due to incompatible volumeMode.",
                ),
                (
                    "VolumeMismatch",
                    "Cannot bind PersistentVolume \"volume4-12\" to requested PersistentVolumeClaim due to incompatible volumeMode.",
                ),
            ],
        },
    ]);
    let after = run(
        &world(
            vec![bound_to(volume("v", "1Gi"), "c")],
            vec![claim("c", "1Gi")],
        ),
        &Subject::Volume("v"),
    )
    .expect("sync");
    assert_eq!(after.requeued, vec!["default/c".to_string()]);
}

#[test]
fn recycle_waits_for_the_pods_using_the_volume() {
    let pod = |name: &str, phase: &str| {
        json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "deleted"}}]},
            "status": {"phase": phase}
        })
    };
    let world = World {
        volumes: vec![with(
            bound_to(volume("v", "1Gi"), "deleted"),
            &[("/spec/persistentVolumeReclaimPolicy", json!("Recycle"))],
        )],
        pods: vec![
            pod("b", "Running"),
            pod("a", "Pending"),
            pod("done", "Succeeded"),
        ],
        ..World::default()
    };
    // A namesake claim replaced the deleted one: its pods do not hold this volume.
    let mut replaced = world.clone();
    replaced.claims = vec![with(
        claim("deleted", "1Gi"),
        &[("/metadata/uid", json!("new"))],
    )];
    let after = run(&replaced, &Subject::Volume("v")).expect("sync");
    assert_eq!(after.events[0].0, "VolumeFailedRecycle");
    assert_eq!(
        after.events[0].1,
        "No recycler plugin found for the volume!"
    );
    let after = run(&world, &Subject::Volume("v")).expect("sync");
    assert_eq!(
        after.events,
        vec![(
            "VolumeFailedRecycle".to_string(),
            "Volume is used by pods: default/a,default/b".to_string()
        )]
    );
    check(
        &after,
        "recycle in use",
        &[("pv", "v", "/status/phase", json!("Released"))],
    );
}

#[test]
fn provisioning_and_delayed_binding() {
    let external = "Waiting for a volume to be created either by the external provisioner 'example.com/nfs' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.";
    let classed = |name: &str, class: &str| {
        with(
            claim(name, "1Gi"),
            &[("/spec/storageClassName", json!(class))],
        )
    };
    let classes = vec![
        class("external", "example.com/nfs", "Immediate"),
        class("local", "kubernetes.io/no-provisioner", "Immediate"),
        class("wffc", "example.com/nfs", "WaitForFirstConsumer"),
    ];
    let world = |claims: Vec<Value>, pods: Vec<Value>| World {
        volumes: vec![],
        claims,
        classes: classes.clone(),
        pods,
    };
    let waiting_pod = |name: &str, node: &str| {
        json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "claim"}}]}
        })
    };
    run_table(vec![
        Case {
            name: "11-1 an external provisioner is asked through both annotations",
            world: world(vec![classed("claim", "external")], vec![]),
            subject: Subject::Claim("claim"),
            checks: vec![
                (
                    "pvc",
                    "claim",
                    "/metadata/annotations",
                    json!({ANN_STORAGE_PROVISIONER: "example.com/nfs", ANN_BETA_STORAGE_PROVISIONER: "example.com/nfs"}),
                ),
                ("pvc", "claim", "/status/phase", json!("Pending")),
            ],
            events: vec![("ExternalProvisioning", external)],
        },
        Case {
            name: "11-2 a missing class fails provisioning",
            world: world(vec![classed("claim", "missing")], vec![]),
            subject: Subject::Claim("claim"),
            checks: vec![("pvc", "claim", "/metadata/annotations", Value::Null)],
            events: vec![(
                "ProvisioningFailed",
                "storageclass.storage.k8s.io \"missing\" not found",
            )],
        },
        Case {
            name: "11-3 kubernetes.io/no-provisioner has no plugin",
            world: world(vec![classed("claim", "local")], vec![]),
            subject: Subject::Claim("claim"),
            checks: vec![("pvc", "claim", "/metadata/annotations", Value::Null)],
            events: vec![(
                "ProvisioningFailed",
                "no volume plugin matched name: kubernetes.io/no-provisioner",
            )],
        },
        Case {
            name: "11-4 WaitForFirstConsumer without consumer",
            world: world(vec![classed("claim", "wffc")], vec![]),
            subject: Subject::Claim("claim"),
            checks: vec![
                ("pvc", "claim", "/metadata/annotations", Value::Null),
                ("pvc", "claim", "/status/phase", json!("Pending")),
            ],
            events: vec![(
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )],
        },
        Case {
            name: "11-5 WaitForFirstConsumer with one unscheduled pod",
            world: world(
                vec![classed("claim", "wffc")],
                vec![waiting_pod("p1", ""), waiting_pod("running", "n1")],
            ),
            subject: Subject::Claim("claim"),
            checks: vec![],
            events: vec![("WaitForPodScheduled", "waiting for pod p1 to be scheduled")],
        },
        Case {
            name: "11-6 WaitForFirstConsumer with two unscheduled pods (a finished one left out)",
            world: world(
                vec![classed("claim", "wffc")],
                vec![
                    waiting_pod("p1", ""),
                    with(
                        waiting_pod("done", ""),
                        &[("/status/phase", json!("Succeeded"))],
                    ),
                    waiting_pod("p2", ""),
                ],
            ),
            subject: Subject::Claim("claim"),
            checks: vec![],
            events: vec![(
                "WaitForPodScheduled",
                "waiting for pods p1,p2 to be scheduled",
            )],
        },
        Case {
            name: "11-7 WaitForFirstConsumer provisions once the node is selected",
            world: world(
                vec![with(
                    classed("claim", "wffc"),
                    &[("/metadata/annotations", json!({ANN_SELECTED_NODE: "n1"}))],
                )],
                vec![],
            ),
            subject: Subject::Claim("claim"),
            checks: vec![
                (
                    "pvc",
                    "claim",
                    "/metadata/annotations/volume.kubernetes.io~1storage-provisioner",
                    json!("example.com/nfs"),
                ),
                (
                    "pvc",
                    "claim",
                    "/metadata/annotations/volume.kubernetes.io~1selected-node",
                    json!("n1"),
                ),
            ],
            events: vec![("ExternalProvisioning", external)],
        },
    ]);
    // Already annotated: no update, the event again.
    let mut annotated = classed("claim", "external");
    set_annotation(&mut annotated, ANN_STORAGE_PROVISIONER, "example.com/nfs");
    let classes_only = World {
        classes: classes.clone(),
        ..World::default()
    };
    let actions = sync_claim(
        &annotated,
        Cluster {
            volumes: &[],
            claims: &[],
            classes: &classes_only.classes,
            pods: &[],
        },
    )
    .expect("sync");
    assert!(
        matches!(actions.as_slice(), [Action::Event(event)] if event.reason == "ExternalProvisioning"),
        "{actions:?}"
    );
}

#[test]
fn default_class_is_assigned_retroactively() {
    let default = |name: &str, created: &str| {
        with(
            class(name, "example.com/p", "Immediate"),
            &[
                ("/metadata/annotations", json!({ANN_DEFAULT_CLASS: "true"})),
                ("/metadata/creationTimestamp", json!(created)),
            ],
        )
    };
    let table: [(&str, Vec<Value>, Value, Option<&str>); 4] = [
        (
            "no default class",
            vec![class("a", "x", "Immediate")],
            claim("c", "1Gi"),
            None,
        ),
        (
            "the newest default",
            vec![
                default("old", "2026-01-01T00:00:00Z"),
                default("new", "2026-02-01T00:00:00Z"),
            ],
            claim("c", "1Gi"),
            Some("new"),
        ),
        (
            "same age: by name",
            vec![
                default("b", "2026-01-01T00:00:00Z"),
                default("a", "2026-01-01T00:00:00Z"),
            ],
            claim("c", "1Gi"),
            Some("a"),
        ),
        (
            "an explicit empty class is kept",
            vec![default("d", "2026-01-01T00:00:00Z")],
            with(claim("c", "1Gi"), &[("/spec/storageClassName", json!(""))]),
            None,
        ),
    ];
    for (case, classes, claim, want) in table {
        let actions = sync_claim(
            &claim,
            Cluster {
                volumes: &[],
                claims: &[],
                classes: &classes,
                pods: &[],
            },
        )
        .expect("sync");
        let assigned = actions.iter().find_map(|a| match a {
            Action::UpdateClaim(c) => c.pointer("/spec/storageClassName").and_then(Value::as_str),
            _ => None,
        });
        assert_eq!(assigned, want, "{case}");
        if want.is_some() {
            assert_eq!(
                actions.len(),
                1,
                "{case}: the sync restarts after the update"
            );
        }
    }
}

#[test]
fn errors_as_upstream() {
    let mut no_mode = class("c", "example.com/p", "Immediate");
    no_mode
        .as_object_mut()
        .map(|c| c.remove("volumeBindingMode"));
    let claim_c = with(claim("x", "1Gi"), &[("/spec/storageClassName", json!("c"))]);
    let classes = [no_mode];
    let cluster = Cluster {
        volumes: &[],
        claims: &[],
        classes: &classes,
        pods: &[],
    };
    assert_eq!(
        sync_claim(&claim_c, cluster)
            .map(|_| ())
            .unwrap_err()
            .to_string(),
        "VolumeBindingMode not set for StorageClass \"c\""
    );
    let volumes = [bound_to(volume("v", "1Gi"), "other")];
    let misbound = with(
        claim("x", "1Gi"),
        &[
            ("/spec/volumeName", json!("v")),
            (
                "/metadata/annotations",
                json!({ANN_BOUND_BY_CONTROLLER: "yes"}),
            ),
        ],
    );
    let cluster = Cluster {
        volumes: &volumes,
        claims: &[],
        classes: &[],
        pods: &[],
    };
    assert_eq!(
        sync_claim(&misbound, cluster)
            .map(|_| ())
            .unwrap_err()
            .to_string(),
        "invalid binding of claim \"default/x\" to volume \"v\": volume already claimed by \"default/other\""
    );
}

#[test]
fn events_are_recorded_by_the_controller() {
    let event = Event {
        involved: reference(&claim("c", "1Gi"), "PersistentVolumeClaim"),
        kind: "Normal",
        reason: "FailedBinding",
        message: "m".into(),
    };
    let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_767_323_045);
    let recorded = event.to_core_event(now);
    assert_eq!(
        recorded["source"]["component"],
        "persistentvolume-controller"
    );
    assert_eq!(recorded["involvedObject"]["kind"], "PersistentVolumeClaim");
    assert_eq!(recorded["involvedObject"]["uid"], "uid-c");
    assert_eq!(recorded["metadata"]["namespace"], "default");
}
