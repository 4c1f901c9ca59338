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

/// What to do about an XID, as NVIDIA's XID catalog's resolution buckets and its
/// health-validation checks advise (an application XID is the workload's to fix; a hardware
/// one takes the node out of service, resets the GPU and escalates on recurrence).
pub fn xid_recovery(xid: u32) -> &'static str {
    match xid {
        13 | 31 | 43 | 45 | 68 | 94 => {
            "restart the application: the error is the workload's (or contained to it); the GPU stays in service"
        }
        109 => "restart the application; if it recurs, reset the GPU",
        48 => {
            "drain the node and reset the GPU (nvidia-smi -r); a second double-bit ECC error on the same GPU means RMA"
        }
        63 => "reset the GPU at the next drain to activate the remapped row",
        64 => "drain the node and reset the GPU; if row remapping keeps failing, RMA the GPU",
        61 | 62 | 95 | 119 | 120 => {
            "drain the node and reset the GPU; reboot the node if the reset fails"
        }
        74 => {
            "drain the node and reset the GPUs of the NVLink domain; check the NVLink cabling or switch trays if it recurs"
        }
        79 => {
            "drain the node and reboot it (a GPU off the bus cannot be reset in place); check power and seating; RMA on recurrence"
        }
        92 => {
            "keep it in service and watch the single-bit ECC rate; plan a reset at the next drain"
        }
        _ => "drain the node and reset the GPU; contact NVIDIA support if it recurs",
    }
}
