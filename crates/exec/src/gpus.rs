//! `nvidia-smi` inside a container: the GPUs and MIG devices the container got, numbered
//! from 0 as the container sees them, in `nvidia-smi -L`'s format and a short form of the
//! default table. Knows nothing of how the devices were assigned.

use std::fmt::Write as _;

use crate::VisibleGpu;

/// The container's GPUs: each parent GPU once, in first-seen order, with its MIG devices.
fn grouped(gpus: &[VisibleGpu]) -> Vec<(&VisibleGpu, Vec<&(String, String)>)> {
    let mut groups: Vec<(&VisibleGpu, Vec<&(String, String)>)> = Vec::new();
    for gpu in gpus {
        let position = groups.iter().position(|(g, _)| g.uuid == gpu.uuid);
        let index = position.unwrap_or_else(|| {
            groups.push((gpu, Vec::new()));
            groups.len() - 1
        });
        if let Some(mig) = &gpu.mig {
            groups[index].1.push(mig);
        }
    }
    groups
}

/// `nvidia-smi -L`.
pub fn list(gpus: &[VisibleGpu]) -> String {
    let mut out = String::new();
    for (index, (gpu, migs)) in grouped(gpus).into_iter().enumerate() {
        let _ = writeln!(
            out,
            "GPU {index}: {} (UUID: {})",
            gpu.product_name, gpu.uuid
        );
        for (device, (profile, uuid)) in migs.into_iter().enumerate() {
            let _ = writeln!(out, "  MIG {profile:<12}Device {device:>2}: (UUID: {uuid})");
        }
    }
    out
}

/// `nvidia-smi` without arguments: the GPU table, idle.
pub fn table(gpus: &[VisibleGpu]) -> String {
    let rule = format!("+{}+", "-".repeat(87));
    let row = |content: String| format!("| {content:<85} |\n");
    let mut out = format!("{rule}\n");
    out += &row(format!(
        "NVIDIA-SMI {DRIVER:<22} Driver Version: {DRIVER:<14} CUDA Version: {CUDA}"
    ));
    out += &format!("{rule}\n");
    out += &row(format!(
        "{:<4} {:<28} {:>24} {:>24}",
        "GPU", "Name", "Memory-Usage", "MIG M."
    ));
    out += &format!("{rule}\n");
    for (index, (gpu, migs)) in grouped(gpus).into_iter().enumerate() {
        let name: String = gpu.product_name.chars().take(28).collect();
        let memory = format!("0MiB / {}MiB", gpu.memory_mib);
        let mig = if migs.is_empty() {
            "Disabled"
        } else {
            "Enabled"
        };
        out += &row(format!("{index:<4} {name:<28} {memory:>24} {mig:>24}"));
    }
    out += &format!("{rule}\n");
    out += &row("Processes:".to_string());
    out += &row("No running processes found".to_string());
    out += &format!("{rule}\n");
    out
}

/// The driver the simulated nodes report.
const DRIVER: &str = "570.124.06";
/// The CUDA version that driver supports.
const CUDA: &str = "12.8";
