//! NVIDIA XID error codes as Tessera knows them: what each means, and which ones NVIDIA's
//! device plugin treats as application errors rather than device failures.
//!
//! A table and a rule; knows nothing of where XIDs come from (NVML events in discovery,
//! annotations in injected faults).

/// What an XID means, in NVIDIA's words where it has them.
pub fn xid_description(xid: u32) -> &'static str {
    match xid {
        13 => "Graphics Engine Exception",
        31 => "GPU memory page fault",
        43 => "GPU stopped processing",
        45 => "Preemptive cleanup, due to previous errors",
        48 => "Double Bit ECC Error",
        61 | 62 => "Internal micro-controller error",
        63 => "ECC page retirement or row remapping recording event",
        64 => "ECC page retirement or row remapper recording failure",
        68 => "NVDEC0 Exception",
        74 => "NVLink Error",
        79 => "GPU has fallen off the bus",
        92 => "High single-bit ECC error rate",
        94 => "Contained ECC error",
        95 => "Uncontained ECC error",
        109 => "Context Switch Timeout Error",
        119 | 120 => "GSP error",
        _ => "GPU error",
    }
}

/// XIDs NVIDIA's device plugin treats as application errors, not device failures.
pub const APPLICATION_XIDS: [u32; 6] = [13, 31, 43, 45, 68, 109];

/// Whether an XID makes the device unhealthy.
pub fn fatal_xid(xid: u32) -> bool {
    !APPLICATION_XIDS.contains(&xid)
}
