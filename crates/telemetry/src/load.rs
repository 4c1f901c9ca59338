//! The load a pod declares for the simulation, by annotation, and the seeded variation
//! of load it leaves to the defaults.
//!
//! | annotation | value | default |
//! |---|---|---|
//! | `sim.tessera.dev/cpu-usage` | CPU per container (`900m`, `2`) | half the container's CPU request (10m without one), capped by its limit |
//! | `sim.tessera.dev/memory-usage` | memory per container (`1Gi`) | 60 % of its memory request (32Mi without one), capped by its limit |
//! | `sim.tessera.dev/gpu-utilization` | `0`–`100`, per GPU or MIG device the pod holds | 50 with a device, 0 idle |
//! | `sim.tessera.dev/gpu-memory` | framebuffer per device (`30Gi`) | a quarter of the device's memory |
//!
//! A declared value is reported exactly (capped by the container's limit or the device's
//! size), so exercises are predictable; defaults vary by a few percent from one 30-second
//! bucket to the next, seeded by the pod's UID. Malformed values are ignored (the default
//! applies) and reported by [`problems`].

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tessera_model::Quantity;

/// Annotation: CPU per container.
pub const CPU_USAGE: &str = "sim.tessera.dev/cpu-usage";
/// Annotation: memory per container.
pub const MEMORY_USAGE: &str = "sim.tessera.dev/memory-usage";
/// Annotation: utilisation (%) of each GPU or MIG device the pod holds.
pub const GPU_UTILIZATION: &str = "sim.tessera.dev/gpu-utilization";
/// Annotation: framebuffer used on each GPU or MIG device the pod holds.
pub const GPU_MEMORY: &str = "sim.tessera.dev/gpu-memory";

/// The length of one variation bucket.
pub const BUCKET_SECONDS: u64 = 30;

/// What a pod declares.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Declared {
    /// CPU per container, in nanocores.
    pub cpu_nanocores: Option<u64>,
    /// Memory per container, in bytes.
    pub memory_bytes: Option<u64>,
    /// Utilisation of each device, 0–100.
    pub gpu_utilization: Option<f64>,
    /// Framebuffer per device, in bytes.
    pub gpu_memory_bytes: Option<u64>,
}

fn annotation<'a>(pod: &'a Value, key: &str) -> Option<&'a str> {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn quantity(text: &str) -> Option<Quantity> {
    text.trim().parse::<Quantity>().ok()
}

/// A non-negative quantity in billionths (CPU: nanocores).
fn nanos(text: &str) -> Option<u64> {
    u64::try_from(quantity(text)?.nanos()).ok()
}

fn bytes(text: &str) -> Option<u64> {
    u64::try_from(quantity(text)?.value()).ok()
}

fn percent(text: &str) -> Option<f64> {
    text.trim()
        .trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (0.0..=100.0).contains(v))
}

impl Declared {
    /// What `pod` declares; malformed annotations are left out.
    pub fn of(pod: &Value) -> Declared {
        Declared {
            cpu_nanocores: annotation(pod, CPU_USAGE).and_then(nanos),
            memory_bytes: annotation(pod, MEMORY_USAGE).and_then(bytes),
            gpu_utilization: annotation(pod, GPU_UTILIZATION).and_then(percent),
            gpu_memory_bytes: annotation(pod, GPU_MEMORY).and_then(bytes),
        }
    }
}

/// An annotation, whether a value is valid for it, and what it wants.
type Check = (&'static str, fn(&str) -> bool, &'static str);

/// The malformed load annotations of `pod`, one message each (`<key>: …`).
pub fn problems(pod: &Value) -> Vec<String> {
    let checks: [Check; 4] = [
        (
            CPU_USAGE,
            |v| nanos(v).is_some(),
            "a non-negative CPU quantity",
        ),
        (
            MEMORY_USAGE,
            |v| bytes(v).is_some(),
            "a non-negative memory quantity",
        ),
        (
            GPU_UTILIZATION,
            |v| percent(v).is_some(),
            "a number from 0 to 100",
        ),
        (
            GPU_MEMORY,
            |v| bytes(v).is_some(),
            "a non-negative memory quantity",
        ),
    ];
    checks
        .iter()
        .filter_map(|(key, ok, wanted)| {
            let value = annotation(pod, key)?;
            (!ok(value)).then(|| format!("{key}: {value:?} is not {wanted}"))
        })
        .collect()
}

/// The annotations of a pod as a map (for callers holding typed objects).
pub fn annotations(pod: &Value) -> BTreeMap<String, String> {
    pod.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Seconds since the epoch (0 before it).
pub fn unix_seconds(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The variation bucket `time` falls in.
pub fn bucket(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() / BUCKET_SECONDS)
        .unwrap_or(0)
}

/// FNV-1a over the parts, then SplitMix64's finaliser: a stable 64-bit seed.
pub fn seed(parts: &[&str], bucket: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    let mut z = hash ^ bucket.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A factor in `[1 - spread, 1 + spread]` drawn from `seed`.
pub fn jitter(seed: u64, spread: f64) -> f64 {
    // 53 bits make an exact f64 in [0, 1).
    let unit = (seed >> 11) as f64 / (1u64 << 53) as f64;
    1.0 + spread * (2.0 * unit - 1.0)
}
