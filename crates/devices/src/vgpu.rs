//! NVIDIA vGPU (C-series, "vGPU for Compute") types per GPU model: each type's framebuffer and
//! how many of it one physical GPU holds, as NVIDIA's "Virtual GPU Types for Supported GPUs"
//! tables list them (time-sliced types; a GPU hosts vGPUs of one type at a time), and the
//! names the vGPU manager and the KubeVirt GPU device plugin use for them (`NVIDIA H100-4C`,
//! the extended resource `nvidia.com/NVIDIA_H100-4C`).
//!
//! Pure data: knows no node, pool or Kubernetes object. MIG-backed vGPU types are not listed.

/// One vGPU type of a GPU model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VgpuType {
    /// The type's name without the `NVIDIA ` prefix (`H100-4C`).
    pub name: &'static str,
    /// Framebuffer of one vGPU, GiB.
    pub framebuffer_gib: u32,
    /// vGPUs of this type one physical GPU holds.
    pub per_gpu: u32,
}

impl VgpuType {
    /// The name the vGPU manager gives the type (`NVIDIA H100-4C`).
    pub fn full_name(&self) -> String {
        format!("NVIDIA {}", self.name)
    }

    /// The extended resource the KubeVirt GPU device plugin registers for it: the type's full
    /// name with spaces as underscores, under `nvidia.com/`.
    pub fn resource_name(&self) -> String {
        format!("nvidia.com/{}", self.full_name().replace(' ', "_"))
    }
}

/// The C-series types of a board with `total_gib` of framebuffer, one per size in `sizes`.
macro_rules! types {
    ($prefix:literal, $total:literal, [$($size:literal),*]) => {
        &[$(VgpuType {
            name: concat!($prefix, "-", stringify!($size), "C"),
            framebuffer_gib: $size,
            per_gpu: $total / $size,
        }),*]
    };
}

const A100_40GB: &[VgpuType] = types!("A100", 40, [40, 20, 10, 8, 5, 4]);
const H100_80GB: &[VgpuType] = types!("H100", 80, [80, 40, 20, 16, 10, 8, 5, 4]);
const L40S: &[VgpuType] = types!("L40S", 48, [48, 24, 16, 12, 8, 6, 4]);

/// The vGPU types of a catalog GPU model (empty where the table has none).
pub fn vgpu_types(gpu_model: &str) -> &'static [VgpuType] {
    match gpu_model {
        "A100-SXM4-40GB" => A100_40GB,
        "H100-SXM5-80GB" => H100_80GB,
        "L40S" => L40S,
        _ => &[],
    }
}

/// The vGPU type `name` (`H100-4C` or `NVIDIA H100-4C`) of `gpu_model`, or why not: the
/// message lists the model's types.
pub fn vgpu_type(gpu_model: &str, name: &str) -> Result<VgpuType, String> {
    let short = name.strip_prefix("NVIDIA ").unwrap_or(name);
    let types = vgpu_types(gpu_model);
    if types.is_empty() {
        return Err(format!("GPU model {gpu_model} has no vGPU types"));
    }
    types
        .iter()
        .find(|t| t.name == short)
        .copied()
        .ok_or_else(|| {
            let known: Vec<&str> = types.iter().map(|t| t.name).collect();
            format!(
                "{name:?} is not a vGPU type of {gpu_model} (it has {})",
                known.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_divide_the_framebuffer() {
        let table = [
            ("H100-SXM5-80GB", "H100-4C", 4, 20),
            ("H100-SXM5-80GB", "NVIDIA H100-80C", 80, 1),
            ("H100-SXM5-80GB", "H100-16C", 16, 5),
            ("H100-SXM5-80GB", "H100-10C", 10, 8),
            ("A100-SXM4-40GB", "A100-5C", 5, 8),
            ("L40S", "L40S-12C", 12, 4),
            ("L40S", "L40S-6C", 6, 8),
        ];
        for (model, name, fb, per_gpu) in table {
            let t = vgpu_type(model, name).expect(name);
            assert_eq!((t.framebuffer_gib, t.per_gpu), (fb, per_gpu), "{name}");
        }
    }

    #[test]
    fn names_follow_the_manager_and_the_device_plugin() {
        let t = vgpu_type("H100-SXM5-80GB", "H100-4C").expect("type");
        assert_eq!(t.full_name(), "NVIDIA H100-4C");
        assert_eq!(t.resource_name(), "nvidia.com/NVIDIA_H100-4C");
    }

    #[test]
    fn unknown_types_and_models_are_named() {
        let table = [
            (
                "H100-SXM5-80GB",
                "H100-3C",
                "\"H100-3C\" is not a vGPU type of H100-SXM5-80GB (it has H100-80C, H100-40C, H100-20C, H100-16C, H100-10C, H100-8C, H100-5C, H100-4C)",
            ),
            ("MI300X", "H100-4C", "GPU model MI300X has no vGPU types"),
            (
                "L40S",
                "H100-4C",
                "\"H100-4C\" is not a vGPU type of L40S (it has L40S-48C, L40S-24C, L40S-16C, L40S-12C, L40S-8C, L40S-6C, L40S-4C)",
            ),
        ];
        for (model, name, want) in table {
            assert_eq!(vgpu_type(model, name).unwrap_err(), want, "{model} {name}");
        }
    }
}
