//! CustomResourceDefinitions served at once: discovery, validation, defaulting, pruning,
//! subresources, printer columns, several versions, and deletion of their objects.

use serde_json::{Value, json};

use crate::support::{TestServer, eventually, post_json, raw, start};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "additionalPrinterColumns": [
                     {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
                     {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                     {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}],
                 "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object", "required": ["size"], "properties": {
                         "size": {"type": "string", "enum": ["small", "large"]},
                         "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                         "owner": {"type": "string", "pattern": "^[a-z]+$"},
                         "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                         "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                         "limit": {"x-kubernetes-int-or-string": true}}},
                     "status": {"type": "object", "properties": {
                         "replicas": {"type": "integer"},
                         "conditions": {"type": "array", "items": {"type": "object", "properties": {
                             "type": {"type": "string"}, "status": {"type": "string"}}}}}}}}}},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    })
}

async fn delete_crd(server: &TestServer, name: &str) {
    let (code, answer, _) = raw(server, "DELETE", &format!("{CRDS}/{name}"), None, vec![]).await;
    assert!(code == 200 || code == 202, "{answer}");
}

async fn install(server: &TestServer) {
    let (code, crd) = post_json(server, CRDS, &widget_crd()).await;
    assert_eq!(code, 201, "{crd}");
    let conditions = crd["status"]["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
}

#[tokio::test]
async fn a_crd_is_served_at_once_in_discovery_and_openapi() {
    let server = start();
    install(&server).await;
    let (code, list, _) = raw(&server, "GET", "/apis/example.com/v1", None, vec![]).await;
    assert_eq!(code, 200);
    let widgets = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap();
    assert_eq!(widgets["kind"], "Widget");
    assert_eq!(widgets["shortNames"], json!(["wd"]));
    assert!(
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "widgets/scale")
    );
    let (_, groups, _) = raw(&server, "GET", "/apis/example.com", None, vec![]).await;
    assert_eq!(groups["preferredVersion"]["version"], "v1");
    let (_, index, _) = raw(&server, "GET", "/openapi/v3", None, vec![]).await;
    let url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, doc, _) = raw(&server, "GET", &url, None, vec![]).await;
    let schema = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["kind"],
        "Widget"
    );
    assert!(
        doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object()
    );
}

#[tokio::test]
async fn objects_are_validated_defaulted_and_pruned() {
    let server = start();
    install(&server).await;
    let widget = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
    let table: Vec<(&str, Value, &str, &str)> = vec![
        (
            "enum",
            json!({"size": "huge"}),
            "spec.size",
            "Unsupported value: \"huge\": supported values: \"small\", \"large\"",
        ),
        ("required", json!({}), "spec.size", "Required value"),
        (
            "minimum",
            json!({"size": "small", "replicas": -1}),
            "spec.replicas",
            "should be greater than or equal to 0",
        ),
        (
            "maximum",
            json!({"size": "small", "replicas": 11}),
            "spec.replicas",
            "should be less than or equal to 10",
        ),
        (
            "pattern",
            json!({"size": "small", "owner": "Bob"}),
            "spec.owner",
            "should match '^[a-z]+$'",
        ),
        (
            "maxItems",
            json!({"size": "small", "tags": ["a", "b", "c"]}),
            "spec.tags",
            "must have at most 2 items",
        ),
        (
            "set",
            json!({"size": "small", "tags": ["a", "a"]}),
            "spec.tags[1]",
            "Duplicate value",
        ),
        (
            "type",
            json!({"size": "small", "replicas": "two"}),
            "spec.replicas",
            "expected \"integer\"",
        ),
        (
            "int-or-string",
            json!({"size": "small", "limit": [1]}),
            "spec.limit",
            "expected \"integer\" or \"string\"",
        ),
    ];
    for (case, spec, field, message) in table {
        let (code, answer) = post_json(&server, WIDGETS, &widget(spec)).await;
        assert_eq!(code, 422, "{case}: {answer}");
        let causes = answer["details"]["causes"].as_array().unwrap();
        assert!(
            causes
                .iter()
                .any(|c| c["field"] == field && c["message"].as_str().unwrap().contains(message)),
            "{case}: {answer}"
        );
    }
    let (code, created) = post_json(
        &server,
        &format!("{WIDGETS}?fieldValidation=Ignore"),
        &widget(json!({"size": "small", "unknown": 1, "extra": {"anything": {"goes": true}}, "limit": "50%"})),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["replicas"], 1, "defaulted");
    assert!(created["spec"].get("unknown").is_none(), "pruned");
    assert_eq!(
        created["spec"]["extra"]["anything"]["goes"], true,
        "preserved"
    );
    let (code, strict) = post_json(&server, &format!("{WIDGETS}?fieldValidation=Strict"), &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": "small", "bogus": 1}})).await;
    assert_eq!(code, 400);
    assert_eq!(
        strict["message"],
        "strict decoding error: unknown field \"spec.bogus\""
    );
}

#[tokio::test]
async fn status_scale_and_printer_columns() {
    let server = start();
    install(&server).await;
    let (code, _) = post_json(&server, WIDGETS, &json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": "large", "replicas": 2}, "status": {"replicas": 9}})).await;
    assert_eq!(code, 201);
    let (_, got, _) = raw(&server, "GET", &format!("{WIDGETS}/w"), None, vec![]).await;
    assert!(got.get("status").is_none(), "status is reset on create");
    let status =
        json!({"status": {"replicas": 2, "conditions": [{"type": "Ready", "status": "True"}]}});
    let (code, _, _) = raw(
        &server,
        "PATCH",
        &format!("{WIDGETS}/w/status?fieldManager=widget-controller"),
        Some("application/merge-patch+json"),
        status.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 200);
    let scale = json!({"spec": {"replicas": 5}});
    let (code, scaled, _) = raw(
        &server,
        "PATCH",
        &format!("{WIDGETS}/w/scale?fieldManager=autoscaler"),
        Some("application/merge-patch+json"),
        scale.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{scaled}");
    assert_eq!(scaled["spec"]["replicas"], 5);
    assert_eq!(scaled["status"]["replicas"], 2);
    // Writes through subresources are owned by their managers, entry by subresource.
    let (_, got, _) = raw(&server, "GET", &format!("{WIDGETS}/w"), None, vec![]).await;
    let entries = got["metadata"]["managedFields"].as_array().unwrap();
    let entry = |manager: &str| {
        entries
            .iter()
            .find(|e| e["manager"] == manager)
            .unwrap_or_else(|| panic!("no entry for {manager}: {entries:?}"))
    };
    assert_eq!(entry("widget-controller")["subresource"], "status");
    assert!(entry("widget-controller")["fieldsV1"]["f:status"]["f:replicas"].is_object());
    assert_eq!(entry("autoscaler")["subresource"], "scale");
    assert_eq!(entry("autoscaler")["operation"], "Update");
    assert_eq!(
        entry("autoscaler")["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );

    use http_body_util::BodyExt;
    let request = http::Request::builder()
        .uri(WIDGETS)
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = crate::support::send(&server, request).await;
    let table: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Size", "Replicas", "Ready"]);
    assert_eq!(table["rows"][0]["cells"], json!(["w", "large", 5, "True"]));

    let smp = json!({"spec": {"size": "small"}});
    let (code, answer, _) = raw(
        &server,
        "PATCH",
        &format!("{WIDGETS}/w"),
        Some("application/strategic-merge-patch+json"),
        smp.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 415, "{answer}");
}

#[tokio::test]
async fn every_served_version_reads_the_same_objects() {
    let server = start();
    install(&server).await;
    let (code, _) = post_json(&server, WIDGETS, &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "small"}})).await;
    assert_eq!(code, 201);
    let (_, old, _) = raw(
        &server,
        "GET",
        "/apis/example.com/v1beta1/namespaces/default/widgets/w",
        None,
        vec![],
    )
    .await;
    assert_eq!(old["apiVersion"], "example.com/v1beta1");
    assert_eq!(old["spec"]["size"], "small");
    let (code, _) = post_json(&server, "/apis/example.com/v1beta1/namespaces/default/widgets", &json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "old"}, "spec": {"anything": 1}})).await;
    assert_eq!(code, 201);
    let (_, list, _) = raw(&server, "GET", WIDGETS, None, vec![]).await;
    let versions: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["apiVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["example.com/v1", "example.com/v1"]);
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_and_stops_serving_it() {
    let server = start();
    install(&server).await;
    for name in ["a", "b"] {
        let (code, _) = post_json(&server, WIDGETS, &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": "small"}})).await;
        assert_eq!(code, 201);
    }
    delete_crd(&server, "widgets.example.com").await;
    let gone = eventually(|| async {
        let (code, _, _) = raw(
            &server,
            "GET",
            &format!("{CRDS}/widgets.example.com"),
            None,
            vec![],
        )
        .await;
        code == 404
    })
    .await;
    assert!(gone, "the CRD is finalized once its objects are gone");
    let (code, _, _) = raw(&server, "GET", WIDGETS, None, vec![]).await;
    assert_eq!(code, 404);
    assert_eq!(
        server
            .server
            .objects()
            .store()
            .count("/example.com/widgets/"),
        0
    );
}

#[tokio::test]
async fn a_crd_whose_kind_is_taken_is_stored_but_not_served_until_the_name_frees() {
    let server = start();
    install(&server).await;
    let mut gadgets = widget_crd();
    gadgets["metadata"]["name"] = json!("gadgets.example.com");
    gadgets["spec"]["names"] =
        json!({"plural": "gadgets", "kind": "Widget", "listKind": "GadgetList"});
    let (code, crd) = post_json(&server, CRDS, &gadgets).await;
    assert_eq!(code, 201, "{crd}");
    let conditions = &crd["status"]["conditions"];
    assert_eq!(conditions[0]["type"], "NamesAccepted");
    assert_eq!(conditions[0]["status"], "False");
    assert_eq!(conditions[0]["reason"], "KindConflict");
    assert_eq!(conditions[0]["message"], r#""Widget" is already in use"#);
    assert_eq!(conditions[1]["reason"], "NotAccepted");
    let gadget_list = "/apis/example.com/v1/namespaces/default/gadgets";
    let (code, _, _) = raw(&server, "GET", gadget_list, None, vec![]).await;
    assert_eq!(code, 404, "an unaccepted CRD is not served");

    delete_crd(&server, "widgets.example.com").await;
    let established = eventually(|| async {
        let (_, crd, _) = raw(
            &server,
            "GET",
            &format!("{CRDS}/gadgets.example.com"),
            None,
            vec![],
        )
        .await;
        crd["status"]["conditions"][1]["status"] == "True"
    })
    .await;
    assert!(established, "freed names are accepted for the waiting CRD");
    let (code, _, _) = raw(&server, "GET", gadget_list, None, vec![]).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn invalid_crds_are_rejected_with_field_paths() {
    let server = start();
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["versions"][1]["storage"] = json!(true);
    let (code, answer) = post_json(&server, CRDS, &crd).await;
    assert_eq!(code, 422, "{answer}");
    let fields: Vec<&str> = answer["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"metadata.name") && fields.contains(&"spec.versions"),
        "{answer}"
    );
    let (_, list, _) = raw(&server, "GET", CRDS, None, vec![]).await;
    assert_eq!(list["items"], json!([]));
}

#[tokio::test]
async fn cel_validation_rules_guard_creates_and_transitions() {
    let server = start();
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = json!([
        {"rule": "!has(self.owner) || self.replicas >= 1", "message": "owned widgets need a replica"},
        {"rule": "self.size == oldSelf.size", "message": "size is immutable", "fieldPath": ".size"}
    ]);
    let (code, answer) = post_json(&server, CRDS, &crd).await;
    assert_eq!(code, 201, "{answer}");
    let (code, answer) = post_json(
        &server,
        WIDGETS,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": "small", "owner": "team", "replicas": 0}}),
    )
    .await;
    assert_eq!(code, 422, "{answer}");
    assert_eq!(
        answer["details"]["causes"][0]["message"],
        "Invalid value: \"object\": owned widgets need a replica"
    );
    let (code, _) = post_json(
        &server,
        WIDGETS,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": "small"}}),
    )
    .await;
    assert_eq!(code, 201, "the transition rule is not applied on create");
    let change = json!({"spec": {"size": "large"}});
    let (code, answer, _) = raw(
        &server,
        "PATCH",
        &format!("{WIDGETS}/w"),
        Some("application/merge-patch+json"),
        change.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 422, "{answer}");
    assert_eq!(answer["details"]["causes"][0]["field"], "spec.size");
    assert_eq!(
        answer["details"]["causes"][0]["message"],
        "Invalid value: \"object\": size is immutable"
    );

    let mut broken = widget_crd();
    broken["metadata"]["name"] = json!("gizmos.example.com");
    broken["spec"]["names"] = json!({"plural": "gizmos", "kind": "Gizmo"});
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
        json!([{"rule": "self.size ==="}]);
    let (code, answer) = post_json(&server, CRDS, &broken).await;
    assert_eq!(code, 422, "{answer}");
    assert_eq!(
        answer["details"]["causes"][0]["field"],
        "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule"
    );
}
