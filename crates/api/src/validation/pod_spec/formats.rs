//! Upstream's string format checks (k8s.io/apimachinery's `util/validation`) that pod specs
//! use, each returning upstream's messages in upstream's order: DNS labels and subdomains,
//! IANA service (port) names, port numbers, environment variable names and config keys.
//!
//! Knows nothing about where a string sits in an object.

use crate::resource::{NameRule, check_name};

const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn dns_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn label_shaped(value: &str) -> bool {
    value.starts_with(dns_char)
        && value.ends_with(dns_char)
        && value.chars().all(|c| dns_char(c) || c == '-')
}

/// `IsDNS1123Label`: at most 63 characters of the label alphabet.
pub fn dns_label(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 63 {
        problems.push(max_length(63));
    }
    if !label_shaped(value) {
        if value.split('.').all(label_shaped) {
            problems.push("must not contain dots".into());
        } else {
            problems.push(LABEL_MESSAGE.into());
        }
    }
    problems
}

/// `NameIsDNSSubdomain`: an object name; with `prefix`, a `generateName`-style prefix whose
/// trailing dash is allowed.
pub fn dns_subdomain(value: &str, prefix: bool) -> Vec<String> {
    let masked;
    let value = match value.strip_suffix('-') {
        Some(stem) if prefix => {
            masked = format!("{stem}a");
            masked.as_str()
        }
        _ => value,
    };
    check_name(value, NameRule::Subdomain).into_iter().collect()
}

fn max_length(limit: usize) -> String {
    format!("must be no more than {limit} characters")
}

/// `IsValidPortName`: an IANA_SVC_NAME.
pub fn port_name(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 15 {
        problems.push(max_length(15));
    }
    if value.is_empty()
        || !value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        problems
            .push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !value.chars().any(|c| c.is_ascii_lowercase()) {
        problems.push("must contain at least one letter (a-z)".into());
    }
    if value.contains("--") {
        problems.push("must not contain consecutive hyphens".into());
    }
    if value.starts_with('-') || value.ends_with('-') {
        problems.push("must not begin or end with a hyphen".into());
    }
    problems
}

/// `IsValidPortNum`: 1 to 65535.
pub fn port_number(value: i64) -> Vec<String> {
    if (1..=65535).contains(&value) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".into()]
    }
}

/// `IsRelaxedEnvVarName`, the rule for environment variable names and `envFrom` prefixes
/// since RelaxedEnvironmentVariableValidation went GA (on and locked in 1.34): printable
/// ASCII other than `=`.
pub fn env_var_name(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.is_empty() {
        problems.push("environment variable name must be non-empty".into());
    }
    if value.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        problems.push(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
                .into(),
        );
    }
    problems
}

/// `IsConfigMapKey`: a key of a ConfigMap or Secret.
pub fn config_map_key(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 253 {
        problems.push(max_length(253));
    }
    if value.is_empty()
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        problems.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".into());
    }
    match value {
        "." => problems.push("must not be '.'".into()),
        ".." => problems.push("must not be '..'".into()),
        _ if value.starts_with("..") => problems.push("must not start with '..'".into()),
        _ => {}
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_report_upstreams_messages() {
        type Check = fn(&str) -> Vec<String>;
        let table: &[(&str, Check, &[&str])] = &[
            ("data", dns_label, &[]),
            ("a.b", dns_label, &["must not contain dots"]),
            ("Data", dns_label, &[LABEL_MESSAGE]),
            ("http", port_name, &[]),
            ("a-1", port_name, &[]),
            (
                "123",
                port_name,
                &["must contain at least one letter (a-z)"],
            ),
            ("a--b", port_name, &["must not contain consecutive hyphens"]),
            ("-abc", port_name, &["must not begin or end with a hyphen"]),
            (
                "abcdefghijklmnop",
                port_name,
                &["must be no more than 15 characters"],
            ),
            ("MY_VAR", env_var_name, &[]),
            ("1-weird.name with space", env_var_name, &[]),
            (
                "A=B",
                env_var_name,
                &[
                    "a valid environment variable name must consist only of printable ASCII characters other than '='",
                ],
            ),
            ("key.name", config_map_key, &[]),
            ("..", config_map_key, &["must not be '..'"]),
        ];
        for (value, check, expected) in table {
            assert_eq!(&check(value), expected, "{value}");
        }
        assert!(dns_subdomain("cm-", true).is_empty());
        assert_eq!(dns_subdomain("cm-", false).len(), 1);
        assert_eq!(port_number(0), ["must be between 1 and 65535, inclusive"]);
        assert!(port_number(65535).is_empty());
    }
}
