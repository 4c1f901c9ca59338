//! Table tests of resize admission, controller expansion and node expansion.

use super::*;
use crate::testing::with;

fn bound_claim(class: &str, asked: &str, has: &str) -> Value {
    json!({
        "metadata": {"namespace": "ns", "name": "data", "uid": "u1"},
        "spec": {"storageClassName": class, "volumeName": "pvc-u1",
                 "resources": {"requests": {"storage": asked}}},
        "status": {"phase": "Bound", "capacity": {"storage": has}},
    })
}

fn volume(driver: &str, size: &str) -> Value {
    json!({"metadata": {"name": "pvc-u1"},
           "spec": {"capacity": {"storage": size}, "csi": {"driver": driver}}})
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_767_323_045)
}

#[test]
fn resizes_are_admitted_only_where_the_class_allows_them() {
    let classes = csi::storage_classes();
    let class = |n: &str| crate::objects::by_name(&classes, n);
    let old = bound_claim(csi::LOCAL_CLASS, "10Gi", "10Gi");
    let table = [
        (
            "growth on an expandable class",
            old.clone(),
            "20Gi",
            class(csi::LOCAL_CLASS),
            Ok(()),
        ),
        (
            "no growth",
            old.clone(),
            "10Gi",
            class(csi::LOCAL_CLASS),
            Ok(()),
        ),
        (
            "shrinking is not this plugin's",
            old.clone(),
            "5Gi",
            None,
            Ok(()),
        ),
        (
            "a class without expansion",
            bound_claim(csi::OBJECT_CLASS, "10Gi", "10Gi"),
            "20Gi",
            class(csi::OBJECT_CLASS),
            Err(NOT_RESIZABLE),
        ),
        (
            "a class that is gone",
            old.clone(),
            "20Gi",
            None,
            Err(NOT_RESIZABLE),
        ),
        (
            "a claim without a class",
            bound_claim("", "10Gi", "10Gi"),
            "20Gi",
            None,
            Err(NOT_RESIZABLE),
        ),
        (
            "a claim not bound",
            with(old.clone(), &[("/status/phase", json!("Pending"))]),
            "20Gi",
            class(csi::LOCAL_CLASS),
            Err(NOT_BOUND),
        ),
    ];
    for (case, old, size, class, want) in table {
        let new = with(
            old.clone(),
            &[("/spec/resources/requests/storage", json!(size))],
        );
        assert_eq!(admit_resize(&old, &new, class), want, "{case}");
    }
}

#[test]
fn a_local_volume_grows_then_waits_for_the_kubelet() {
    let claim = bound_claim(csi::LOCAL_CLASS, "20Gi", "10Gi");
    let Resize::Expand {
        claim,
        volume,
        events,
    } = resize(&claim, &volume(LOCAL_DRIVER, "10Gi"), Some(50 << 30), now())
    else {
        panic!("expanded");
    };
    assert_eq!(volume["spec"]["capacity"]["storage"], "20Gi");
    assert_eq!(claim["status"]["capacity"]["storage"], "10Gi");
    assert_eq!(claim["status"]["allocatedResources"]["storage"], "20Gi");
    assert_eq!(
        claim["status"]["allocatedResourceStatuses"]["storage"],
        "NodeResizePending"
    );
    assert_eq!(
        claim["status"]["conditions"][0]["type"],
        "FileSystemResizePending"
    );
    let reasons: Vec<&str> = events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["Resizing", "FileSystemResizeRequired"]);
    assert_eq!(
        events[0].message,
        "External resizer is resizing volume pvc-u1"
    );
    // Pending on the node: the resizer leaves it; the kubelet finishes it.
    assert_eq!(resize(&claim, &volume, Some(50 << 30), now()), Resize::Skip);
    let (done, message) = finish_node_expansion(&claim, "n1").expect("finished");
    assert_eq!(done["status"]["capacity"]["storage"], "20Gi");
    assert!(done["status"].get("allocatedResourceStatuses").is_none());
    assert!(done["status"].get("conditions").is_none());
    assert_eq!(
        message,
        "MountVolume.NodeExpandVolume succeeded for volume \"pvc-u1\" n1"
    );
    assert_eq!(finish_node_expansion(&done, "n1"), None);
}

#[test]
fn resizes_by_driver_and_room() {
    let table = [
        (
            "shared finishes at once",
            csi::SHARED_CLASS,
            SHARED_DRIVER_NAME,
            None,
            "expand VolumeResizeSuccessful 20Gi",
        ),
        (
            "no room on the node",
            csi::LOCAL_CLASS,
            LOCAL_DRIVER,
            Some(5_i128 << 30),
            "fail VolumeResizeFailed",
        ),
        (
            "another driver's volume",
            csi::LOCAL_CLASS,
            "ebs.csi.aws.com",
            None,
            "skip",
        ),
    ];
    for (case, class, driver, free, want) in table {
        let claim = bound_claim(class, "20Gi", "10Gi");
        let got = match resize(&claim, &volume(driver, "10Gi"), free, now()) {
            Resize::Skip => "skip".to_string(),
            Resize::Expand { claim, events, .. } => format!(
                "expand {} {}",
                events[1].reason,
                claim["status"]["capacity"]["storage"]
                    .as_str()
                    .unwrap_or_default()
            ),
            Resize::Fail { claim, events } => {
                assert_eq!(
                    claim["status"]["allocatedResourceStatuses"]["storage"],
                    "ControllerResizeInfeasible"
                );
                // The same size again is not retried.
                assert_eq!(
                    resize(&claim, &volume(driver, "10Gi"), free, now()),
                    Resize::Skip
                );
                format!("fail {}", events[1].reason)
            }
        };
        assert_eq!(got, want, "{case}");
    }
}

const SHARED_DRIVER_NAME: &str = csi::SHARED_DRIVER;
