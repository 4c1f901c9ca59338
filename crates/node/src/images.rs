//! The kubelet's image decisions: image references parsed as the container runtime reads
//! them (registry host, `docker.io`/`library/` defaults, tag `latest`, digests), whether a
//! container's image is pulled (`imagePullPolicy` `Always` / `IfNotPresent` with the node's
//! cached images / `Never`), the image back-off per pod and image (client-go's
//! `flowcontrol.Backoff`: 10 s doubling to 300 s), the simulated registries' pull verdict
//! (reachable, needing authorization, holding the image; the pod's `imagePullSecrets` matched
//! to the registry host as the kubelet's credential keyring matches), how long a pull takes,
//! and the kubelet's and containerd's messages (`Pulling`, `Pulled`, `Failed`, `BackOff`
//! events; `ErrImagePull`, `ImagePullBackOff`, `ErrImageNeverPull` waiting reasons).
//!
//! Pure: time is an input, secrets arrive as their `.dockerconfigjson` bytes. Knows nothing
//! of the API server, of timers, or of how the twins carry a pull out.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

/// The registry an image without a host comes from.
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// The tag an image without tag or digest gets.
pub const DEFAULT_TAG: &str = "latest";
/// The first back-off after a failed pull (the kubelet's `backOffPeriod`).
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
/// The longest back-off (the kubelet's `MaxContainerBackOff`).
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The size of an image a registry does not list (small, so simulated pulls are quick).
pub const DEFAULT_IMAGE_SIZE: u64 = 4 * 1024 * 1024;
/// A pool's registry bandwidth when the topology names none (bytes per second).
pub const DEFAULT_BANDWIDTH: u64 = 200 * 1024 * 1024;
/// The Secret type that holds a `.dockerconfigjson`.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// The key of a `kubernetes.io/dockerconfigjson` Secret's data.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";

/// Waiting reason of a container whose pull failed.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
/// Waiting reason of a container whose image is in back-off.
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
/// Waiting reason and event reason of an absent image with pull policy `Never`.
pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
/// Waiting reason of an image reference that does not parse.
pub const INVALID_IMAGE_NAME: &str = "InvalidImageName";

/// Why an image reference is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The reference is empty.
    #[error("image: the reference is empty")]
    Empty,
    /// The reference does not read as `[host/]path[:tag][@digest]`.
    #[error("couldn't parse image name {image:?}: {message}")]
    Invalid {
        /// The reference as written.
        image: String,
        /// What is wrong.
        message: String,
    },
}

/// An image reference, normalised as containerd does (`nginx` is
/// `docker.io/library/nginx:latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// The registry host (with port), `docker.io` by default.
    pub registry: String,
    /// The repository path within the registry (`library/nginx`).
    pub repository: String,
    /// The tag, when one is given or defaulted (`latest` when neither tag nor digest is).
    pub tag: Option<String>,
    /// The digest (`sha256:…`), when one is given.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `image` as the runtime normalises a reference.
    pub fn parse(image: &str) -> Result<ImageRef, ImageError> {
        if image.is_empty() {
            return Err(ImageError::Empty);
        }
        let invalid = |message: &str| ImageError::Invalid {
            image: image.to_string(),
            message: message.to_string(),
        };
        if image
            .chars()
            .any(|c| c.is_whitespace() || c.is_ascii_uppercase())
        {
            // Repository names are lower case (upper case is allowed only in the host and tag;
            // a reference with upper case in its path is rejected by the runtime).
            let path_part = image.split_once('/').map_or(image, |(_, rest)| rest);
            let path_only = path_part.split(['@', ':']).next().unwrap_or_default();
            if image.chars().any(char::is_whitespace)
                || path_only.chars().any(|c| c.is_ascii_uppercase())
            {
                return Err(invalid(
                    "invalid reference format: repository name must be lowercase",
                ));
            }
        }
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => {
                let (algorithm, hex) = digest.split_once(':').ok_or_else(|| {
                    invalid("invalid reference format: digest needs an algorithm")
                })?;
                if algorithm.is_empty()
                    || hex.len() < 32
                    || !hex.chars().all(|c| c.is_ascii_hexdigit())
                {
                    return Err(invalid("invalid reference format: malformed digest"));
                }
                (rest, Some(digest.to_string()))
            }
            None => (image, None),
        };
        // A tag is after the last ':' that follows the last '/'.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&rest[..at], Some(rest[at + 1..].to_string()))
            }
            None => (rest, None),
        };
        if let Some(tag) = &tag {
            let ok = !tag.is_empty()
                && tag.len() <= 128
                && tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                && !tag.starts_with(['.', '-']);
            if !ok {
                return Err(invalid("invalid reference format: malformed tag"));
            }
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), path.to_string())
            }
            _ => (DEFAULT_REGISTRY.to_string(), name.to_string()),
        };
        let repository = if registry == DEFAULT_REGISTRY && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.chars().all(|ch| {
                    ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-')
                })
                && c.starts_with(|ch: char| ch.is_ascii_alphanumeric())
                && c.ends_with(|ch: char| ch.is_ascii_alphanumeric())
        };
        if registry.is_empty() || !repository.split('/').all(component_ok) {
            return Err(invalid("invalid reference format"));
        }
        let tag = match (tag, &digest) {
            (None, None) => Some(DEFAULT_TAG.to_string()),
            (tag, _) => tag,
        };
        Ok(ImageRef {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The fully qualified reference (`docker.io/library/nginx:latest`).
    pub fn canonical(&self) -> String {
        let mut text = format!("{}/{}", self.registry, self.repository);
        if let Some(tag) = &self.tag {
            text.push(':');
            text.push_str(tag);
        }
        if let Some(digest) = &self.digest {
            text.push('@');
            text.push_str(digest);
        }
        text
    }

    /// `repository:tag` (or `repository@digest`), how a registry's image list names it.
    pub fn short_name(&self) -> String {
        self.canonical()[self.registry.len() + 1..].to_string()
    }

    /// The reference as it would be pulled through `mirror` (the registry replaced).
    pub fn through(&self, mirror: &str) -> ImageRef {
        ImageRef {
            registry: mirror.to_string(),
            ..self.clone()
        }
    }
}

/// A container's `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull every time a container starts.
    Always,
    /// Pull when the node does not have the image.
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// The policy named `text`, or the API server's default for `image` when `text` is
    /// absent or empty.
    pub fn parse(text: Option<&str>, image: &str) -> Result<PullPolicy, String> {
        match text.unwrap_or_default() {
            "Always" => Ok(PullPolicy::Always),
            "IfNotPresent" => Ok(PullPolicy::IfNotPresent),
            "Never" => Ok(PullPolicy::Never),
            "" => Ok(default_pull_policy(image)),
            other => Err(format!(
                "imagePullPolicy: Unsupported value: {other:?}: supported values: \"Always\", \"IfNotPresent\", \"Never\""
            )),
        }
    }
}

/// The API server's default: `Always` for a `:latest` tag or no tag (and no digest), else
/// `IfNotPresent` (`SetDefaults_Container`).
pub fn default_pull_policy(image: &str) -> PullPolicy {
    // As upstream: the tag is read from the reference as written; a digest pins it.
    let Ok(parsed) = ImageRef::parse(image) else {
        return PullPolicy::IfNotPresent;
    };
    if parsed.digest.is_some() {
        return PullPolicy::IfNotPresent;
    }
    match parsed.tag.as_deref() {
        Some(DEFAULT_TAG) | None => PullPolicy::Always,
        Some(_) => PullPolicy::IfNotPresent,
    }
}

/// What the kubelet does about a container's image before starting it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullNeed {
    /// Pull it.
    Pull,
    /// It is on the node: `Pulled` with [`present_message`].
    Present,
    /// It is not and may not be pulled: `ErrImageNeverPull` with [`never_pull_message`].
    NeverPull,
}

/// Whether an image is pulled under `policy` when the node has it (`present`) or not
/// (`shouldPullImage`).
pub fn pull_need(policy: PullPolicy, present: bool) -> PullNeed {
    match (policy, present) {
        (PullPolicy::Always, _) => PullNeed::Pull,
        (PullPolicy::IfNotPresent, false) => PullNeed::Pull,
        (PullPolicy::IfNotPresent, true) | (PullPolicy::Never, true) => PullNeed::Present,
        (PullPolicy::Never, false) => PullNeed::NeverPull,
    }
}

/// The `Pulling` event's message.
pub fn pulling_message(image: &str) -> String {
    format!("Pulling image {image:?}")
}

/// The `Pulled` event's message after a pull that took `took` (of which `waited` including
/// waiting for the pull to start) for an image of `size` bytes.
pub fn pulled_message(image: &str, took: Duration, waited: Duration, size: u64) -> String {
    format!(
        "Successfully pulled image {image:?} in {} ({} including waiting). Image size: {size} bytes.",
        go_duration(truncate_ms(took)),
        go_duration(truncate_ms(waited))
    )
}

/// The `Pulled` event's message when the node has the image.
pub fn present_message(image: &str) -> String {
    format!("Container image {image:?} already present on machine")
}

/// The `ErrImageNeverPull` event's and waiting message.
pub fn never_pull_message(image: &str) -> String {
    format!("Container image {image:?} is not present with pull policy of Never")
}

/// The `Failed` event's message for a failed pull.
pub fn failed_message(image: &str, error: &PullError) -> String {
    format!("Failed to pull image {image:?}: {}", error.message())
}

/// The `BackOff` event's message.
pub fn backoff_event_message(image: &str) -> String {
    format!("Back-off pulling image {image:?}")
}

/// The waiting message of a container in `ImagePullBackOff`: the back-off and the previous
/// pull's error, as the kubelet wraps them.
pub fn backoff_waiting_message(image: &str, previous: Option<&PullError>) -> String {
    match previous {
        Some(error) => format!(
            "{}: {ERR_IMAGE_PULL}: {}",
            backoff_event_message(image),
            error.message()
        ),
        None => backoff_event_message(image),
    }
}

/// The `Failed` event the runtime manager records after the image step failed
/// (`Error: ErrImagePull`, `Error: ImagePullBackOff`).
pub fn container_error_message(reason: &str) -> String {
    format!("Error: {reason}")
}

fn truncate_ms(duration: Duration) -> Duration {
    Duration::from_millis(duration.as_millis() as u64)
}

/// `duration` written as Go's `time.Duration.String` writes it (`52ms`, `1.2s`, `1m5.5s`).
pub fn go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", trim_fraction(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", trim_fraction(nanos, 1_000_000));
    }
    let total_seconds = duration.as_secs();
    let fraction = nanos % 1_000_000_000;
    let hours = total_seconds / 3600;
    let minutes = (total_seconds % 3600) / 60;
    let seconds = total_seconds % 60;
    let seconds_text = trim_fraction(
        u128::from(seconds) * 1_000_000_000 + fraction,
        1_000_000_000,
    );
    match (hours, minutes) {
        (0, 0) => format!("{seconds_text}s"),
        (0, m) => format!("{m}m{seconds_text}s"),
        (h, m) => format!("{h}h{m}m{seconds_text}s"),
    }
}

/// `value / unit` with its fraction's trailing zeros trimmed.
fn trim_fraction(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let fraction = value % unit;
    if fraction == 0 {
        return whole.to_string();
    }
    let width = unit.to_string().len() - 1;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// How long pulling `size` bytes takes at `bandwidth` bytes per second (at least 1 ms).
pub fn pull_duration(size: u64, bandwidth: u64) -> Duration {
    let bandwidth = bandwidth.max(1);
    let millis = (u128::from(size) * 1000).div_ceil(u128::from(bandwidth));
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX).max(1))
}

/// The kubelet's back-off key for a pod's image.
pub fn backoff_key(pod_uid: &str, image: &str) -> String {
    format!("{pod_uid}_{image}")
}

/// One back-off entry: the current back-off and when it last grew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BackoffEntry {
    backoff: Duration,
    last_update: SystemTime,
}

/// client-go's `flowcontrol.Backoff` with the kubelet's image parameters: per key, a back-off
/// starting at [`INITIAL_BACKOFF`] that doubles up to [`MAX_BACKOFF`] on each failure, and is
/// forgotten when no failure came for twice the maximum.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    entries: BTreeMap<String, BackoffEntry>,
}

impl Backoff {
    /// No back-off for any key.
    pub fn new() -> Backoff {
        Backoff::default()
    }

    fn expired(entry: &BackoffEntry, now: SystemTime) -> bool {
        now.duration_since(entry.last_update)
            .is_ok_and(|since| since > MAX_BACKOFF * 2)
    }

    /// A failure of `key` at `now`: the back-off starts or doubles (`Next`).
    pub fn next(&mut self, key: &str, now: SystemTime) -> Duration {
        let backoff = match self.entries.get(key) {
            Some(entry) if !Self::expired(entry, now) => (entry.backoff * 2).min(MAX_BACKOFF),
            _ => INITIAL_BACKOFF,
        };
        self.entries.insert(
            key.to_string(),
            BackoffEntry {
                backoff,
                last_update: now,
            },
        );
        backoff
    }

    /// The current back-off of `key` (zero when it has none).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// Whether `key` is still in back-off at `now` since its last failure
    /// (`IsInBackOffSinceUpdate`).
    pub fn in_backoff(&self, key: &str, now: SystemTime) -> bool {
        self.entries.get(key).is_some_and(|entry| {
            now.duration_since(entry.last_update)
                .map_or(true, |since| since < entry.backoff)
        })
    }

    /// When `key`'s back-off ends (none when it has none).
    pub fn until(&self, key: &str) -> Option<SystemTime> {
        self.entries
            .get(key)
            .map(|entry| entry.last_update + entry.backoff)
    }

    /// Forgets `key` (the pod went away).
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Forgets every key of pod `uid`.
    pub fn forget_pod(&mut self, uid: &str) {
        let prefix = format!("{uid}_");
        self.entries.retain(|key, _| !key.starts_with(&prefix));
    }

    /// Forgets entries not updated for twice the maximum back-off (`GC`).
    pub fn gc(&mut self, now: SystemTime) {
        self.entries.retain(|_, entry| !Self::expired(entry, now));
    }
}

/// A simulated registry, as the topology declares it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registry {
    /// Host (with port) that image references name.
    pub host: String,
    /// Whether pulls need credentials.
    pub auth: bool,
    /// The images it holds (`repository:tag` → size in bytes); empty: it holds any image,
    /// of [`DEFAULT_IMAGE_SIZE`].
    pub images: BTreeMap<String, u64>,
}

/// A fault injected on a registry (`tessera fault registry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryFault {
    /// The registry does not answer.
    Unreachable,
    /// The registry refuses every pull.
    Unauthorized,
}

impl RegistryFault {
    /// The fault named `text` (`unreachable`, `unauthorized`).
    pub fn parse(text: &str) -> Result<RegistryFault, String> {
        match text {
            "unreachable" => Ok(RegistryFault::Unreachable),
            "unauthorized" => Ok(RegistryFault::Unauthorized),
            other => Err(format!(
                "unknown registry fault {other:?} (expected unreachable or unauthorized)"
            )),
        }
    }
}

/// Why a pull failed, as containerd reports it to the kubelet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullError {
    /// The registry did not answer.
    Unreachable {
        /// The reference pulled.
        reference: String,
        /// The registry host.
        host: String,
        /// The repository path.
        repository: String,
        /// The tag or digest.
        object: String,
    },
    /// The registry wants credentials the pod did not give (or refused them).
    Unauthorized {
        /// The reference pulled.
        reference: String,
    },
    /// The registry does not have the image or tag.
    NotFound {
        /// The reference pulled.
        reference: String,
    },
    /// The registry's address resolved but nothing answered: the connection was dropped on
    /// the way (a NetworkPolicy).
    Timeout {
        /// The reference pulled.
        reference: String,
        /// The manifest URL asked (`http://host/v2/<repository>/manifests/<object>`).
        url: String,
        /// The address dialled (`10.96.0.20:5000`).
        address: String,
    },
    /// The registry refused the credentials the pod's pull secrets hold.
    Denied {
        /// The reference pulled.
        reference: String,
        /// The manifest URL asked.
        url: String,
    },
}

impl PullError {
    /// The runtime's error text (`rpc error: code = … desc = …`).
    /// The registry of `image` did not answer its manifest request.
    pub fn unreachable(image: &ImageRef) -> PullError {
        PullError::Unreachable {
            reference: image.canonical(),
            host: image.registry.clone(),
            repository: image.repository.clone(),
            object: image
                .digest
                .clone()
                .or_else(|| image.tag.clone())
                .unwrap_or_else(|| DEFAULT_TAG.to_string()),
        }
    }

    pub fn message(&self) -> String {
        match self {
            PullError::Unreachable {
                reference,
                host,
                repository,
                object,
            } => format!(
                "rpc error: code = Unknown desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": failed to do request: Head \"https://{host}/v2/{repository}/manifests/{object}\": dial tcp: lookup {}: i/o timeout",
                host.split(':').next().unwrap_or(host)
            ),
            PullError::Unauthorized { reference } => format!(
                "rpc error: code = Unknown desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": pull access denied, repository does not exist or may require authorization: authorization failed: no basic auth credentials"
            ),
            PullError::NotFound { reference } => format!(
                "rpc error: code = NotFound desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": {reference}: not found"
            ),
            PullError::Timeout {
                reference,
                url,
                address,
            } => format!(
                "rpc error: code = Unknown desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": failed to do request: Head \"{url}\": dial tcp {address}: i/o timeout"
            ),
            PullError::Denied { reference, url } => format!(
                "rpc error: code = Unknown desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": unexpected status from HEAD request to {url}: 401 Unauthorized"
            ),
        }
    }
}

/// What a pull asks of a registry.
#[derive(Debug, Clone, Copy)]
pub struct PullRequest<'a> {
    /// The image, normalised.
    pub image: &'a ImageRef,
    /// The registry the image's host names, when the topology declares it (unknown
    /// registries are reachable, anonymous and hold every image).
    pub registry: Option<&'a Registry>,
    /// A fault injected on that registry.
    pub fault: Option<RegistryFault>,
    /// Whether one of the pod's pull secrets holds credentials for the registry.
    pub credentials: bool,
}

/// The registry's answer to a pull: the image's size in bytes, or the runtime's error.
pub fn pull_verdict(request: PullRequest<'_>) -> Result<u64, PullError> {
    let image = request.image;
    let reference = image.canonical();
    match request.fault {
        Some(RegistryFault::Unreachable) => {
            return Err(PullError::unreachable(image));
        }
        Some(RegistryFault::Unauthorized) => return Err(PullError::Unauthorized { reference }),
        None => {}
    }
    let Some(registry) = request.registry else {
        return Ok(DEFAULT_IMAGE_SIZE);
    };
    if registry.auth && !request.credentials {
        return Err(PullError::Unauthorized { reference });
    }
    if registry.images.is_empty() {
        return Ok(DEFAULT_IMAGE_SIZE);
    }
    let short = image.short_name();
    if let Some(size) = registry.images.get(&short) {
        return Ok(*size);
    }
    // A digest pull of an image the registry lists by tag: the digest is not checked.
    if image.digest.is_some() {
        let by_repository = registry
            .images
            .iter()
            .find(|(name, _)| name.split(':').next() == Some(image.repository.as_str()));
        if let Some((_, size)) = by_repository {
            return Ok(*size);
        }
    }
    Err(PullError::NotFound { reference })
}

/// The simulated registries of a topology, each pool's mirror and pull bandwidth.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registries {
    /// Declared registries by host.
    pub registries: BTreeMap<String, Registry>,
    /// A pool's registry mirror host, by pool.
    pub mirrors: BTreeMap<String, String>,
    /// A pool's pull bandwidth in bytes per second, by pool.
    pub bandwidth: BTreeMap<String, u64>,
}

impl Registries {
    /// The pull bandwidth of `pool`'s nodes.
    pub fn bandwidth(&self, pool: &str) -> u64 {
        self.bandwidth
            .get(pool)
            .copied()
            .unwrap_or(DEFAULT_BANDWIDTH)
    }

    /// Pulls `image` from a node of `pool`: through the pool's mirror first, as containerd
    /// tries a host's mirrors before the registry itself, falling back to the registry when
    /// the mirror fails. `faults` are the injected registry faults by host; `credentials`
    /// says whether the pod's pull secrets hold credentials for an image's registry. Gives
    /// the host pulled from and the size, or the last error.
    pub fn pull(
        &self,
        pool: &str,
        image: &ImageRef,
        faults: &BTreeMap<String, RegistryFault>,
        credentials: &dyn Fn(&ImageRef) -> bool,
    ) -> Result<(String, u64), PullError> {
        let attempt = |source: &ImageRef| {
            pull_verdict(PullRequest {
                image: source,
                registry: self.registries.get(&source.registry),
                fault: faults.get(&source.registry).copied(),
                credentials: credentials(source),
            })
            .map(|size| (source.registry.clone(), size))
        };
        if let Some(mirror) = self.mirrors.get(pool).filter(|m| **m != image.registry) {
            let through = image.through(mirror);
            if let Ok(found) = attempt(&through) {
                return Ok(found);
            }
        }
        attempt(image)
    }
}

/// The node annotation prefix of an injected registry fault (`tessera fault registry`): the
/// key `fault.tessera.dev/registry-<host>` with the host's `:` written `_`, the value the
/// fault's kind.
pub const REGISTRY_FAULT_PREFIX: &str = "fault.tessera.dev/registry-";

/// The annotation key of a fault on registry `host`.
pub fn registry_fault_key(host: &str) -> String {
    format!("{REGISTRY_FAULT_PREFIX}{}", host.replace(':', "_"))
}

impl RegistryFault {
    /// The value the fault's annotation holds.
    pub fn as_str(self) -> &'static str {
        match self {
            RegistryFault::Unreachable => "unreachable",
            RegistryFault::Unauthorized => "unauthorized",
        }
    }
}

/// The registry faults a node's annotations record, by host; values that do not read are
/// reported, naming the key.
pub fn registry_faults<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> (BTreeMap<String, RegistryFault>, Vec<String>) {
    let mut faults = BTreeMap::new();
    let mut problems = Vec::new();
    for (key, value) in annotations {
        let Some(host) = key.strip_prefix(REGISTRY_FAULT_PREFIX) else {
            continue;
        };
        match RegistryFault::parse(value) {
            Ok(fault) => {
                faults.insert(host.replace('_', ":"), fault);
            }
            Err(message) => problems.push(format!("{key}: {message}")),
        }
    }
    (faults, problems)
}

/// `status` (a pod status patch whose containers all wait) with `container` waiting for
/// `reason` and `message` instead, as the kubelet shows a container whose image step failed.
pub fn with_waiting(
    mut status: serde_json::Value,
    container: &str,
    reason: &str,
    message: &str,
) -> serde_json::Value {
    if let Some(statuses) = status["status"]["containerStatuses"].as_array_mut() {
        for entry in statuses.iter_mut().filter(|e| e["name"] == container) {
            entry["state"] = serde_json::json!({"waiting": {"reason": reason, "message": message}});
        }
    }
    status
}

/// One `status.images` entry: the image's names (its reference, and the digest form) and size.
pub fn node_image(image: &ImageRef, size: u64) -> serde_json::Value {
    let mut names = vec![image.canonical()];
    if let Some(digest) = &image.digest {
        names.push(format!("{}/{}@{digest}", image.registry, image.repository));
    }
    names.dedup();
    serde_json::json!({"names": names, "sizeBytes": size})
}

/// The node's `status.images`: the model cache's entries and the pulled images together,
/// largest first (as the kubelet sorts them), names breaking ties.
pub fn merged_node_images(
    models: Vec<serde_json::Value>,
    pulled: Vec<serde_json::Value>,
) -> serde_json::Value {
    let mut all: Vec<serde_json::Value> = models.into_iter().chain(pulled).collect();
    let size = |v: &serde_json::Value| v["sizeBytes"].as_u64().unwrap_or_default();
    let name = |v: &serde_json::Value| v["names"][0].as_str().unwrap_or_default().to_string();
    all.sort_by(|a, b| size(b).cmp(&size(a)).then_with(|| name(a).cmp(&name(b))));
    serde_json::Value::Array(all)
}

/// The kubelet's event reason when a pod's pull secrets cannot all be read.
pub const FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET: &str = "FailedToRetrieveImagePullSecret";

/// The `FailedToRetrieveImagePullSecret` warning for the `missing` secrets.
pub fn missing_secrets_message(missing: &[String]) -> String {
    format!(
        "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
        missing.join(", ")
    )
}

/// Why a `.dockerconfigjson` does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{DOCKER_CONFIG_JSON_KEY}: {0}")]
pub struct DockerConfigError(String);

#[derive(Debug, Deserialize)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, DockerConfigEntry>,
}

#[derive(Debug, Deserialize, Default)]
struct DockerConfigEntry {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    auth: Option<String>,
}

impl DockerConfigEntry {
    fn has_credentials(&self) -> bool {
        let filled = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
        filled(&self.auth) || (filled(&self.username) && filled(&self.password))
    }
}

/// The registry keys of a `.dockerconfigjson` that carry credentials.
pub fn docker_config_keys(bytes: &[u8]) -> Result<Vec<String>, DockerConfigError> {
    let config: DockerConfigJson =
        serde_json::from_slice(bytes).map_err(|e| DockerConfigError(e.to_string()))?;
    Ok(config
        .auths
        .into_iter()
        .filter(|(_, entry)| entry.has_credentials())
        .map(|(key, _)| key)
        .collect())
}

/// Whether a keyring key (`https://index.docker.io/v1/`, `registry.example:5000`,
/// `*.example.com/team`) matches `image`, as the kubelet's credential keyring matches: the
/// scheme dropped, Docker Hub's legacy names meaning `docker.io`, the host matched segment by
/// segment with `*` globs, the port exactly, the key's path a prefix of the repository.
pub fn key_matches(key: &str, image: &ImageRef) -> bool {
    let trimmed = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let (host, path) = match trimmed.split_once('/') {
        Some((host, path)) => (host, path.trim_end_matches('/')),
        None => (trimmed, ""),
    };
    let docker_hub = matches!(
        host,
        "index.docker.io" | "docker.io" | "registry-1.docker.io"
    );
    let (host, path) = if docker_hub {
        // `https://index.docker.io/v1/` is Docker Hub as a whole.
        ("docker.io", if path == "v1" { "" } else { path })
    } else {
        (host, path)
    };
    let (key_host, key_port) = split_port(host);
    let (image_host, image_port) = split_port(&image.registry);
    if key_port != image_port {
        return false;
    }
    let key_parts: Vec<&str> = key_host.split('.').collect();
    let image_parts: Vec<&str> = image_host.split('.').collect();
    if key_parts.len() != image_parts.len() {
        return false;
    }
    let hosts_match = key_parts
        .iter()
        .zip(&image_parts)
        .all(|(pattern, part)| glob_matches(pattern, part));
    if !hosts_match {
        return false;
    }
    path.is_empty()
        || image.repository == path
        || image
            .repository
            .strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn split_port(host: &str) -> (&str, &str) {
    match host.rsplit_once(':') {
        Some((host, port)) => (host, port),
        None => (host, ""),
    }
}

/// `*` matches any run of characters within one host segment.
fn glob_matches(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern.eq_ignore_ascii_case(text),
        Some((prefix, rest)) => {
            let lower = text.to_ascii_lowercase();
            let Some(remaining) = lower.strip_prefix(&prefix.to_ascii_lowercase()) else {
                return false;
            };
            (0..=remaining.len())
                .filter(|&i| remaining.is_char_boundary(i))
                .any(|i| glob_matches(rest, &remaining[i..]))
        }
    }
}

/// The user names and passwords the pull secrets (their `.dockerconfigjson` bytes) hold for
/// `image`'s registry, in the keyring's order (secrets in order, keys as written); `auth`
/// is base64 of `user:password` and wins over `username`/`password`.
pub fn secrets_credentials(secrets: &[Vec<u8>], image: &ImageRef) -> Vec<(String, String)> {
    use base64::Engine;
    let mut found = Vec::new();
    for bytes in secrets {
        let Ok(config) = serde_json::from_slice::<DockerConfigJson>(bytes) else {
            continue;
        };
        for (key, entry) in config.auths {
            if !entry.has_credentials() || !key_matches(&key, image) {
                continue;
            }
            let from_auth = entry
                .auth
                .as_deref()
                .filter(|a| !a.is_empty())
                .and_then(|a| base64::engine::general_purpose::STANDARD.decode(a).ok())
                .and_then(|a| String::from_utf8(a).ok())
                .and_then(|a| {
                    a.split_once(':')
                        .map(|(u, p)| (u.to_string(), p.to_string()))
                });
            match from_auth {
                Some(pair) => found.push(pair),
                None => found.push((
                    entry.username.clone().unwrap_or_default(),
                    entry.password.clone().unwrap_or_default(),
                )),
            }
        }
    }
    found
}

/// Whether any of the pull secrets (their `.dockerconfigjson` bytes) holds credentials for
/// `image`'s registry. Secrets that do not read are skipped, as the kubelet skips them.
pub fn secrets_have_credentials(secrets: &[Vec<u8>], image: &ImageRef) -> bool {
    secrets.iter().any(|bytes| {
        docker_config_keys(bytes)
            .map(|keys| keys.iter().any(|key| key_matches(key, image)))
            .unwrap_or(false)
    })
}

#[cfg(test)]
#[path = "images_tests.rs"]
mod tests;
