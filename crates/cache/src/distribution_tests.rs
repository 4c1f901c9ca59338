use super::*;

const HEX: &str = "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945";

fn digest() -> String {
    format!("sha256:{HEX}")
}

#[test]
fn paths_name_their_routes() {
    let d = digest();
    let cases: Vec<(String, Option<Result<Route, ErrorCode>>)> = vec![
        ("/v2/".into(), Some(Ok(Route::Ping))),
        ("/v2".into(), Some(Ok(Route::Ping))),
        ("/models/x".into(), None),
        (
            "/v2/team/app/manifests/v1".into(),
            Some(Ok(Route::Manifest {
                name: "team/app".into(),
                reference: Reference::Tag("v1".into()),
            })),
        ),
        (
            format!("/v2/app/manifests/{d}"),
            Some(Ok(Route::Manifest {
                name: "app".into(),
                reference: Reference::Digest(d.clone()),
            })),
        ),
        (
            format!("/v2/a/b/c/blobs/{d}"),
            Some(Ok(Route::Blob {
                name: "a/b/c".into(),
                digest: d.clone(),
            })),
        ),
        (
            "/v2/team/app/blobs/uploads/".into(),
            Some(Ok(Route::StartUpload {
                name: "team/app".into(),
            })),
        ),
        (
            "/v2/team/app/blobs/uploads".into(),
            Some(Ok(Route::StartUpload {
                name: "team/app".into(),
            })),
        ),
        (
            "/v2/team/app/blobs/uploads/0b1c-2d".into(),
            Some(Ok(Route::Upload {
                name: "team/app".into(),
                id: "0b1c-2d".into(),
            })),
        ),
        (
            "/v2/team/app/tags/list".into(),
            Some(Ok(Route::Tags {
                name: "team/app".into(),
            })),
        ),
        // A repository whose last component is `blobs` or `manifests` still parses.
        (
            "/v2/x/manifests/manifests/v1".into(),
            Some(Ok(Route::Manifest {
                name: "x/manifests".into(),
                reference: Reference::Tag("v1".into()),
            })),
        ),
        (
            "/v2/Team/app/manifests/v1".into(),
            Some(Err(ErrorCode::NameInvalid)),
        ),
        (
            "/v2/team/app/manifests/-v1".into(),
            Some(Err(ErrorCode::ManifestInvalid)),
        ),
        (
            "/v2/team/app/manifests/sha256:abc".into(),
            Some(Err(ErrorCode::DigestInvalid)),
        ),
        (
            format!("/v2/team/app/blobs/md5:{HEX}"),
            Some(Err(ErrorCode::DigestInvalid)),
        ),
        (
            "/v2/team/app/blobs/uploads/../x".into(),
            Some(Err(ErrorCode::Unsupported)),
        ),
        (
            "/v2/team/app/blobs/uploads/zz!".into(),
            Some(Err(ErrorCode::BlobUploadUnknown)),
        ),
        ("/v2/team/app".into(), Some(Err(ErrorCode::Unsupported))),
    ];
    for (path, want) in cases {
        let got = parse_path(&path).map(|r| r.map_err(|e| e.code));
        assert_eq!(got, want, "{path}");
    }
}

#[test]
fn names_follow_the_spec_grammar() {
    for (name, ok) in [
        ("app", true),
        ("team/app", true),
        ("a.b_c__d---e/f0", true),
        ("", false),
        ("App", false),
        ("team//app", false),
        ("/app", false),
        ("app/", false),
        ("a___b", false),
        ("a_-b", false),
        ("-a", false),
        ("a.", false),
        ("a..b", false),
        ("a b", false),
    ] {
        assert_eq!(check_name(name).is_ok(), ok, "{name:?}");
    }
    let long = "a".repeat(256);
    let error = check_name(&long).unwrap_err();
    assert!(error.message.contains("255"), "{error}");
    assert_eq!(error.code.as_str(), "NAME_INVALID");
}

#[test]
fn tags_and_digests_are_checked() {
    for (tag, ok) in [
        ("v1", true),
        ("_x", true),
        ("V1.2-rc_3", true),
        (".x", false),
        ("-x", false),
        ("", false),
        ("a/b", false),
    ] {
        assert_eq!(check_tag(tag).is_ok(), ok, "{tag:?}");
    }
    assert!(check_tag(&"a".repeat(128)).is_ok());
    assert!(check_tag(&"a".repeat(129)).is_err());
    assert!(check_digest(&digest()).is_ok());
    for (bad, want) in [
        ("sha256:ABC", "64 lower-case hex"),
        (
            &format!("sha256:{}", HEX.to_uppercase()),
            "64 lower-case hex",
        ),
        (&format!("sha512:{HEX}"), "only sha256"),
        ("nocolon", "<algorithm>:<hex>"),
        (":abc", "<algorithm>:<hex>"),
    ] {
        let error = check_digest(bad).unwrap_err();
        assert_eq!(error.code, ErrorCode::DigestInvalid);
        assert!(error.message.contains(want), "{bad}: {error}");
    }
    assert_eq!(
        digest_of(b"hello"),
        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
}

#[test]
fn error_codes_have_their_statuses_and_body() {
    for (code, text, status) in [
        (ErrorCode::BlobUnknown, "BLOB_UNKNOWN", 404),
        (ErrorCode::BlobUploadUnknown, "BLOB_UPLOAD_UNKNOWN", 404),
        (ErrorCode::ManifestUnknown, "MANIFEST_UNKNOWN", 404),
        (ErrorCode::NameUnknown, "NAME_UNKNOWN", 404),
        (ErrorCode::DigestInvalid, "DIGEST_INVALID", 400),
        (ErrorCode::ManifestBlobUnknown, "MANIFEST_BLOB_UNKNOWN", 400),
        (ErrorCode::ManifestInvalid, "MANIFEST_INVALID", 400),
        (ErrorCode::NameInvalid, "NAME_INVALID", 400),
        (ErrorCode::SizeInvalid, "SIZE_INVALID", 400),
        (ErrorCode::BlobUploadInvalid, "BLOB_UPLOAD_INVALID", 400),
        (ErrorCode::RangeInvalid, "BLOB_UPLOAD_INVALID", 416),
        (ErrorCode::Unauthorized, "UNAUTHORIZED", 401),
        (ErrorCode::Unsupported, "UNSUPPORTED", 405),
        (ErrorCode::Unknown, "UNKNOWN", 500),
    ] {
        assert_eq!((code.as_str(), code.status()), (text, status));
    }
    let body: Value = serde_json::from_str(
        &RegistryError::new(ErrorCode::ManifestUnknown, "manifest unknown: v9").body(),
    )
    .unwrap();
    assert_eq!(
        body,
        serde_json::json!({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown: v9"}]})
    );
}

fn image_manifest(media_type: Option<&str>) -> Vec<u8> {
    let mut value = serde_json::json!({
        "schemaVersion": 2,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(), "size": 100},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{}", "1".repeat(64)), "size": 2000},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{}", "2".repeat(64)), "size": 3000},
        ],
    });
    if let Some(media_type) = media_type {
        value["mediaType"] = Value::from(media_type);
    }
    serde_json::to_vec(&value).unwrap()
}

#[test]
fn manifests_give_their_blobs_and_image_size() {
    let manifest =
        inspect_manifest(Some(OCI_MANIFEST), &image_manifest(Some(OCI_MANIFEST))).unwrap();
    assert_eq!(manifest.media_type, OCI_MANIFEST);
    assert_eq!(manifest.size, 5100);
    assert_eq!(
        manifest.blobs,
        vec![
            digest(),
            format!("sha256:{}", "1".repeat(64)),
            format!("sha256:{}", "2".repeat(64))
        ]
    );
    // The media type from the header when the body has none; Docker's schema 2 too.
    let docker = inspect_manifest(
        Some(&format!("{DOCKER_MANIFEST}; charset=utf-8")),
        &image_manifest(None),
    )
    .unwrap();
    assert_eq!(docker.media_type, DOCKER_MANIFEST);
    let index = serde_json::json!({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": format!("sha256:{}", "a".repeat(64)), "size": 500,
             "platform": {"os": "linux", "architecture": "arm64"}},
            {"mediaType": OCI_MANIFEST, "digest": format!("sha256:{}", "b".repeat(64)), "size": 400,
             "platform": {"os": "linux", "architecture": "amd64"}},
        ],
    });
    let index = inspect_manifest(None, &serde_json::to_vec(&index).unwrap()).unwrap();
    assert!(is_index(&index.media_type));
    assert!(index.blobs.is_empty());
    assert_eq!(
        platform_entry(&index.manifests, "linux/amd64"),
        Some(format!("sha256:{}", "b".repeat(64)).as_str())
    );
    assert_eq!(
        platform_entry(&index.manifests, "windows/amd64"),
        Some(format!("sha256:{}", "a".repeat(64)).as_str())
    );
}

#[test]
fn bad_manifests_are_refused_naming_the_field() {
    let mut no_size: Value = serde_json::from_slice(&image_manifest(None)).unwrap();
    no_size["layers"][1]["size"] = Value::from(-1);
    let mut bad_digest: Value = serde_json::from_slice(&image_manifest(None)).unwrap();
    bad_digest["config"]["digest"] = Value::from("sha256:xyz");
    let mut v1: Value = serde_json::from_slice(&image_manifest(None)).unwrap();
    v1["schemaVersion"] = Value::from(1);
    let mut no_layers: Value = serde_json::from_slice(&image_manifest(None)).unwrap();
    no_layers.as_object_mut().unwrap().remove("layers");
    for (content_type, body, want) in [
        (None, b"{".to_vec(), "not JSON"),
        (None, b"[]".to_vec(), "not a JSON object"),
        (None, serde_json::to_vec(&v1).unwrap(), "schemaVersion"),
        (
            None,
            serde_json::to_vec(&no_size).unwrap(),
            "layers[1].size",
        ),
        (
            None,
            serde_json::to_vec(&bad_digest).unwrap(),
            "config.digest",
        ),
        (
            None,
            serde_json::to_vec(&no_layers).unwrap(),
            "layers: an array",
        ),
        (
            Some(DOCKER_MANIFEST),
            image_manifest(Some(OCI_MANIFEST)),
            "differs from the Content-Type",
        ),
        (
            Some("text/plain"),
            image_manifest(None),
            "not a manifest this registry accepts",
        ),
    ] {
        let error = inspect_manifest(content_type, &body).unwrap_err();
        assert_eq!(error.code, ErrorCode::ManifestInvalid, "{want}");
        assert!(error.message.contains(want), "{error} lacks {want}");
    }
    let huge = vec![b' '; MANIFEST_MAX_BYTES + 1];
    assert_eq!(
        inspect_manifest(None, &huge).unwrap_err().code,
        ErrorCode::SizeInvalid
    );
}

#[test]
fn chunks_must_continue_the_upload() {
    for (header, have, want) in [
        (None, 10, None),
        (Some("0-99"), 0, None),
        (Some("100-199"), 100, None),
        (Some("bytes=100-199"), 100, None),
        (Some("50-99"), 100, Some(ErrorCode::RangeInvalid)),
        (Some("100-99"), 100, Some(ErrorCode::RangeInvalid)),
        (Some("abc"), 0, Some(ErrorCode::BlobUploadInvalid)),
    ] {
        assert_eq!(
            check_chunk(header, have).err().map(|e| e.code),
            want,
            "{header:?} at {have}"
        );
    }
    assert_eq!(upload_range(0), "0-0");
    assert_eq!(upload_range(10), "0-9");
}

#[test]
fn query_parameters_are_decoded() {
    let query = Some("mount=sha256%3Aabc&from=team%2Fapp&n=2&flag");
    assert_eq!(query_param(query, "mount").as_deref(), Some("sha256:abc"));
    assert_eq!(query_param(query, "from").as_deref(), Some("team/app"));
    assert_eq!(query_param(query, "flag").as_deref(), Some(""));
    assert_eq!(query_param(query, "digest"), None);
    assert_eq!(query_param(None, "n"), None);
    assert_eq!(query_param(Some("d=%zz"), "d"), None);
}

#[test]
fn tag_lists_page_with_links() {
    let tags = || vec!["v3".to_string(), "v1".into(), "v2".into(), "latest".into()];
    let (all, link) = tag_page("team/app", tags(), None, None).unwrap();
    assert_eq!(all, ["latest", "v1", "v2", "v3"]);
    assert_eq!(link, None);
    let (page, link) = tag_page("team/app", tags(), Some("2"), None).unwrap();
    assert_eq!(page, ["latest", "v1"]);
    assert_eq!(
        link.as_deref(),
        Some("</v2/team/app/tags/list?n=2&last=v1>; rel=\"next\"")
    );
    let (page, link) = tag_page("team/app", tags(), Some("2"), Some("v1")).unwrap();
    assert_eq!(page, ["v2", "v3"]);
    assert_eq!(link, None);
    let error = tag_page("team/app", tags(), Some("x"), None).unwrap_err();
    assert_eq!(error.code, ErrorCode::SizeInvalid);
}
