//! Extended resource names as Kubernetes tells them apart (`v1helper.IsExtendedResourceName`,
//! `schedutil.IsDRAExtendedResourceName`), and the names DRAExtendedResource (KEP-5004) gives
//! things: a DeviceClass's implied resource `deviceclass.resource.kubernetes.io/<class>` and
//! the annotation of the claim the scheduler makes for a pod's extended resources.
//!
//! Pure string rules; knows nothing of where a name is used (validation, scheduling, kubelet).

/// The prefix of a DeviceClass's implied extended resource name.
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The annotation (value `"true"`) of the claim the scheduler creates for a pod's extended
/// resources backed by DRA.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

/// Quota's prefix for requests, under which an extended resource name must still be a
/// qualified name.
const REQUESTS_PREFIX: &str = "requests.";

fn dns_label_shaped(part: &str) -> bool {
    let dns = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !part.is_empty()
        && part.len() <= 63
        && part.starts_with(dns)
        && part.ends_with(dns)
        && part.chars().all(|c| dns(c) || c == '-')
}

/// apimachinery's `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of
/// at most 63 alphanumerics, `-`, `_` or `.`, starting and ending alphanumerically.
fn qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    let prefix_ok = prefix.is_none_or(|p| p.len() <= 253 && p.split('.').all(dns_label_shaped));
    let alnum = |c: char| c.is_ascii_alphanumeric();
    prefix_ok
        && !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// `v1helper.IsExtendedResourceName`: not a native resource (it has a `/` and no
/// `kubernetes.io/` in it), not quota's `requests.` form, and a qualified name once quota's
/// `requests.` is put in front.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native
        && !name.starts_with(REQUESTS_PREFIX)
        && qualified_name(&format!("{REQUESTS_PREFIX}{name}"))
}

/// `schedutil.IsDRAExtendedResourceName`: an extended resource name, or a DeviceClass's
/// implied one.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resource_names_follow_upstream() {
        // Cases of upstream's TestIsExtendedResourceName and the DeviceClass validation tests.
        let table = [
            ("nvidia.com/gpu", true, true),
            ("example.com/dongle", true, true),
            ("foo.bar/my-resource_1.x", true, true),
            ("cpu", false, false),
            ("memory", false, false),
            ("hugepages-1Gi", false, false),
            ("kubernetes.io/something", false, false),
            ("requests.kubernetes.io/gpu", false, false),
            ("example.kubernetes.io/gpu", false, false),
            ("requests.example.com/gpu", false, false),
            ("example.com/", false, false),
            ("Example.com/gpu", false, false),
            ("example.com/-gpu", false, false),
            ("example.com/gpu/x", false, false),
            (
                "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
                false,
                true,
            ),
        ];
        for (name, extended, dra) in table {
            assert_eq!(is_extended_resource_name(name), extended, "{name}");
            assert_eq!(is_dra_extended_resource_name(name), dra, "{name}");
        }
        let long = format!("example.com/{}", "a".repeat(64));
        assert!(!is_extended_resource_name(&long), "name part over 63");
    }
}
