//! The configuration file's forms, defaults and errors (upstream's `validation_test.go` cases
//! for names and duplicates, `defaults_test.go` for the defaults).

use super::*;
use crate::api::{Level, Version};

const INLINE: &str = "\
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  path: quota.yaml
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
      enforce-version: v1.30
      warn: restricted
    exemptions:
      usernames: [admin]
      namespaces:
      - kube-system
      runtimeClasses:
      - kata
";

#[test]
fn reads_an_inline_configuration_with_defaults() {
    let PluginConfig::Inline(config) = parse_admission_configuration(INLINE).expect("valid") else {
        panic!("inline expected");
    };
    assert_eq!(
        config.defaults.enforce,
        LevelVersion::new(Level::Baseline, Version::new(1, 30))
    );
    assert_eq!(
        config.defaults.warn,
        LevelVersion::new(Level::Restricted, Version::Latest)
    );
    assert_eq!(
        config.defaults.audit,
        LevelVersion::new(Level::Privileged, Version::Latest)
    );
    assert_eq!(config.exemptions.usernames, ["admin"]);
    assert_eq!(config.exemptions.namespaces, ["kube-system"]);
    assert_eq!(config.exemptions.runtime_classes, ["kata"]);
}

#[test]
fn reads_a_path_a_bare_configuration_and_an_absent_plugin() {
    let path = "\
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: podsecurity.yaml
";
    assert_eq!(
        parse_admission_configuration(path),
        Ok(PluginConfig::Path("podsecurity.yaml".into()))
    );
    let bare = "\
apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
exemptions:
  namespaces: [ops]
";
    let PluginConfig::Inline(config) = parse_admission_configuration(bare).expect("valid") else {
        panic!("inline expected");
    };
    assert!(config.defaults.fully_privileged());
    assert_eq!(config.exemptions.namespaces, ["ops"]);
    assert_eq!(
        parse_pod_security_configuration(bare).map(|c| c.exemptions.namespaces),
        Ok(vec!["ops".to_string()])
    );
    let other = "\
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  path: limits.yaml
";
    assert_eq!(
        parse_admission_configuration(other),
        Ok(PluginConfig::Absent)
    );
}

fn errors(text: &str) -> Vec<String> {
    parse_admission_configuration(text)
        .expect_err("invalid")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn errors_name_the_line_and_the_field() {
    let bad = INLINE
        .replace("enforce: baseline", "enforce: strict")
        .replace("warn: restricted", "warn-version: v2")
        .replace(
            "- kube-system",
            "- kube-system\n      - Bad_Name\n      - kube-system",
        );
    assert_eq!(
        errors(&bad),
        vec![
            r#"line 11: plugins[1].configuration.defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#.to_string(),
            r#"line 13: plugins[1].configuration.defaults.warn-version: Invalid value: "v2": must be "latest" or "v1.x""#.to_string(),
            r#"line 18: plugins[1].configuration.exemptions.namespaces[1]: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#.to_string(),
            r#"line 19: plugins[1].configuration.exemptions.namespaces[2]: Duplicate value: "kube-system""#.to_string(),
        ]
    );
}

#[test]
fn refuses_wrong_kinds_versions_and_missing_sources() {
    assert_eq!(
        errors("apiVersion: v1\nkind: ConfigMap\n"),
        vec![
            r#"line 2: kind: Unsupported value: "ConfigMap": supported values: "AdmissionConfiguration", "PodSecurityConfiguration""#
        ]
    );
    let wrong_version = INLINE.replace(
        "pod-security.admission.config.k8s.io/v1\n",
        "pod-security.admission.config.k8s.io/v2\n",
    );
    assert_eq!(
        errors(&wrong_version),
        vec![
            r#"line 8: plugins[1].configuration.apiVersion: Unsupported value: "pod-security.admission.config.k8s.io/v2": supported values: "pod-security.admission.config.k8s.io/v1", "pod-security.admission.config.k8s.io/v1beta1", "pod-security.admission.config.k8s.io/v1alpha1""#
        ]
    );
    let neither = "\
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
";
    assert_eq!(
        errors(neither),
        vec!["line 4: plugins[0]: Required value: either configuration or path must be set"]
    );
    let empty_user = "\
apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
exemptions:
  usernames: ['']
  runtimeClasses: [Not.Valid]
";
    let got = errors(empty_user);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with(r#"line 5: exemptions.runtimeClasses[0]: Invalid value: "Not.Valid": a lowercase RFC 1123 subdomain"#), "{got:?}");
    assert_eq!(
        got[1],
        r#"line 4: exemptions.usernames[0]: Invalid value: "": username must not be empty"#
    );
    assert!(errors("a: [")[0].starts_with("(document): not valid YAML"));
}

#[test]
fn refuses_unknown_fields_and_a_missing_kind_as_upstreams_strict_decoding() {
    let misspelt = "\
apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
deflaults:
  enforce: baseline
exemptions:
  namespace: [ops]
";
    assert_eq!(
        errors(misspelt),
        vec![
            r#"line 3: deflaults: unknown field "deflaults""#,
            r#"line 6: exemptions.namespace: unknown field "namespace""#,
        ]
    );
    let kindless = "apiVersion: pod-security.admission.config.k8s.io/v1\ndefaults: {}\n";
    assert_eq!(
        parse_pod_security_configuration(kindless)
            .expect_err("no kind")
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["kind: Required value: 'Kind' is missing"]
    );
}
