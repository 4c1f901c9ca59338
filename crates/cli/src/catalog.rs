//! `tessera catalog`: prints the accelerator catalog — GPU models, a model's MIG profiles,
//! server models, and a server's `nvidia-smi topo -m` matrix — optionally with the user's own
//! catalog files added.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tessera_devices::Catalog;
use tessera_devices::catalog::{BUILT_IN, BUILT_IN_SERVERS};

/// Arguments of `tessera catalog`.
#[derive(Args, Debug)]
pub struct CatalogArgs {
    /// Extra catalog files (`gpus:` and `servers:` lists) checked together with the built-in one.
    #[arg(long = "file", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print the MIG profiles of this GPU model.
    #[arg(long, value_name = "GPU_MODEL")]
    pub mig: Option<String>,
    /// Print the device topology matrix of this server model.
    #[arg(long, value_name = "SERVER_MODEL")]
    pub topology: Option<String>,
}

/// Runs `tessera catalog`.
pub fn run(args: &CatalogArgs) -> anyhow::Result<()> {
    let mut texts = Vec::new();
    for file in &args.files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("reading catalog file {}", file.display()))?;
        texts.push((file.display().to_string(), text));
    }
    let mut sources: Vec<(&str, &str)> = vec![
        ("built-in catalog (gpus.yaml)", BUILT_IN),
        ("built-in catalog (servers.yaml)", BUILT_IN_SERVERS),
    ];
    sources.extend(
        texts
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str())),
    );
    let catalog = Catalog::parse_all(&sources)?;
    crate::output::emit(&render(&catalog, args)?)
}

fn render(catalog: &Catalog, args: &CatalogArgs) -> anyhow::Result<String> {
    if let Some(name) = &args.mig {
        let gpu = catalog
            .gpu(name)
            .with_context(|| format!("no GPU model {name:?} in the catalog"))?;
        let mig = gpu
            .mig
            .as_ref()
            .with_context(|| format!("{name} does not support MIG"))?;
        let mut out = String::from("PROFILE\tCOMPUTE\tMEMORY\tMAX\tSIZE\tSTARTS\n");
        for profile in &mig.profiles {
            let memory = profile.memory_mib.map_or_else(
                || format!("{}GB", profile.named_memory_gb().unwrap_or_default()),
                |mib| format!("{mib}MiB"),
            );
            let starts: Vec<String> = profile.starts.iter().map(u8::to_string).collect();
            out.push_str(&format!(
                "{}\t{}/{}\t{memory}\t{}\t{}/{}\t{}\n",
                profile.name,
                profile.compute_slices,
                mig.compute_slices,
                profile.max_instances,
                profile.size,
                mig.memory_slices,
                starts.join(",")
            ));
        }
        return Ok(out);
    }
    if let Some(name) = &args.topology {
        let server = catalog
            .server(name)
            .with_context(|| format!("no server model {name:?} in the catalog"))?;
        return Ok(server.topology_matrix());
    }
    let mut out = String::from("GPU MODEL\tVENDOR:DEVICE\tPRODUCT\tMEMORY\tCC\tMIG PROFILES\n");
    for gpu in catalog.gpus() {
        out.push_str(&format!(
            "{}\t{}:{}\t{}\t{}MiB\t{}\t{}\n",
            gpu.name,
            gpu.vendor_id,
            gpu.device_id,
            gpu.product_name,
            gpu.memory_mib,
            gpu.compute_capability.as_deref().unwrap_or("-"),
            gpu.mig.as_ref().map_or(0, |m| m.profiles.len())
        ));
    }
    out.push_str("\nSERVER MODEL\tGPUS\tSOCKETS\tNICS\tDESCRIPTION\n");
    for server in catalog.servers() {
        out.push_str(&format!(
            "{}\t{}x {}\t{}\t{}\t{}\n",
            server.name,
            server.gpus.len(),
            server.gpu_model.as_deref().unwrap_or("-"),
            server.sockets,
            server.nics.len(),
            server.description
        ));
    }
    Ok(out)
}
