"""Drives `tessera up` with the official Python Kubernetes client (`pip install kubernetes`).

Usage: official_client.py KUBECONFIG. Prints one JSON object of what the client saw; the Rust
end-to-end test (python.rs) asserts on it. Every call goes through the client's generated
models, so a field the server leaves null where the client requires a value fails here the way
it fails for users.
"""

import json
import sys
import time

from kubernetes import client, config


def wait_for(check, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def main():
    config.load_kube_config(config_file=sys.argv[1])
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    events = client.EventsV1Api()
    version = client.VersionApi().get_code()
    seen = {"gitVersion": version.git_version}

    seen["nodes"] = sorted(node.metadata.name for node in core.list_node().items)

    namespace = client.V1Namespace(metadata=client.V1ObjectMeta(name="py"))
    core.create_namespace(namespace)
    labels = {"app": "py-web"}
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="py-web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="web", image="nginx:1.27")]
                ),
            ),
        ),
    )
    apps.create_namespaced_deployment("py", deployment)
    ready = wait_for(
        lambda: (apps.read_namespaced_deployment_status("py-web", "py").status.ready_replicas or 0) == 2,
        "two ready replicas",
    )
    seen["deploymentReady"] = ready
    pods = core.list_namespaced_pod("py", label_selector="app=py-web").items
    seen["pods"] = [
        {"phase": pod.status.phase, "node": pod.spec.node_name, "ip": pod.status.pod_ip}
        for pod in pods
    ]

    # events.k8s.io/v1 through the generated models: eventTime is required there.
    scheduled = wait_for(
        lambda: [
            e
            for e in events.list_namespaced_event("py").items
            if e.reason == "Scheduled"
        ],
        "Scheduled events",
    )
    first = scheduled[0]
    seen["scheduledEvent"] = {
        "eventTime": first.event_time.isoformat() if first.event_time else None,
        "reportingController": first.reporting_controller,
        "reportingInstance": first.reporting_instance,
        "regarding": first.regarding.kind,
    }

    # Patch and watch through the client's own machinery.
    apps.patch_namespaced_deployment_scale("py-web", "py", {"spec": {"replicas": 1}})
    seen["scaledTo"] = apps.read_namespaced_deployment("py-web", "py").spec.replicas

    # A bad object is refused with the field named, and nothing is stored.
    try:
        core.create_namespaced_config_map(
            "py", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name"))
        )
        seen["badName"] = None
    except client.exceptions.ApiException as error:
        seen["badName"] = {"status": error.status, "body": json.loads(error.body)["message"]}

    print(json.dumps(seen))


if __name__ == "__main__":
    main()
