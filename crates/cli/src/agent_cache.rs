//! `tessera agent cache`: the node cache daemon (issue 21, deliverable 3) as a process.
//!
//! Parses the flags into a `tessera_node_cache::Config`, opens the store under `--root`
//! (complete blobs found there are served at once; partial downloads resume on their next
//! pull), serves the peer protocol on `--listen` and prints `listening on http://ADDR` on
//! stdout once bound, then runs until interrupted. Everything else is the crate's.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tessera_cache::eviction::Watermarks;
use tessera_node_cache::{Cache, Config, PeerSpec};

/// Arguments of `tessera agent cache`.
#[derive(Args, Debug)]
pub struct CacheArgs {
    /// The store's directory (blobs/, partial/, meta/, hf/).
    #[arg(long)]
    pub root: PathBuf,
    /// Where the peer protocol listens (`127.0.0.1:0` picks a port).
    #[arg(long, default_value = "0.0.0.0:4005")]
    pub listen: String,
    /// This node's name (the seed ranking's key).
    #[arg(long, env = "NODE_NAME")]
    pub node: String,
    /// This node's rack (parents in the same rack are preferred).
    #[arg(long)]
    pub rack: Option<String>,
    /// This node's zone (parents in the same zone are preferred).
    #[arg(long)]
    pub zone: Option<String>,
    /// Another cache: `NAME=URL[,rack[,zone]]` (repeatable).
    #[arg(long = "peer", value_parser = PeerSpec::parse)]
    pub peers: Vec<PeerSpec>,
    /// The store's byte budget (`500Gi`, `10G`, or bytes).
    #[arg(long, default_value = "100Gi", value_parser = bytes)]
    pub capacity: u64,
    /// The high watermark, percent of the capacity.
    #[arg(long, default_value_t = 80)]
    pub high_watermark: u8,
    /// The low watermark eviction brings usage down to, percent of the capacity.
    #[arg(long, default_value_t = 60)]
    pub low_watermark: u8,
    /// Bytes a second read from the origin, all downloads together (unlimited without).
    #[arg(long, value_parser = bytes)]
    pub origin_rate: Option<u64>,
    /// Bytes a second served to peers, all together (unlimited without).
    #[arg(long, value_parser = bytes)]
    pub upload_rate: Option<u64>,
    /// Pieces served to peers at once (upload slots). One piece at a time at the link's
    /// full rate reaches its requester, which can pass it on, soonest.
    #[arg(long, default_value_t = 1)]
    pub upload_slots: usize,
    /// Peer requests waiting for an upload slot; more are answered 503 and go elsewhere.
    #[arg(long, default_value_t = 1)]
    pub upload_queue: usize,
    /// A fixed piece length instead of the 8–16 MiB rule (tests and benches).
    #[arg(long, value_parser = bytes)]
    pub piece_length: Option<u64>,
    /// How long a failed pull is remembered, in milliseconds.
    #[arg(long, default_value_t = tessera_cache::single_flight::DEFAULT_ERROR_TTL_MS)]
    pub error_ttl_ms: u64,
}

/// `123`, `10K`/`10M`/`10G`/`10T` (powers of 1000) or `10Ki`/`10Mi`/`10Gi`/`10Ti` (of 1024).
pub fn bytes(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count such as 500Gi, 10G or 1048576"))?;
    let factor: u64 = match unit {
        "" => 1,
        "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (K, M, G, T, Ki, Mi, Gi, Ti)"
            ));
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Runs the daemon until interrupted.
pub async fn run(args: &CacheArgs) -> anyhow::Result<()> {
    let mut config = Config::new(&args.root, &args.node);
    config.rack = args.rack.clone();
    config.zone = args.zone.clone();
    config.peers = args.peers.clone();
    config.capacity = args.capacity;
    config.watermarks = Watermarks::new(args.high_watermark, args.low_watermark)?;
    config.origin_rate = args.origin_rate;
    config.upload_rate = args.upload_rate;
    if args.upload_slots == 0 {
        anyhow::bail!("--upload-slots 0: at least one piece must be served at a time");
    }
    config.upload_slots = args.upload_slots;
    config.upload_queue = args.upload_queue;
    config.piece_length = args.piece_length;
    config.error_ttl = Duration::from_millis(args.error_ttl_ms);
    let cache = Cache::open(config)
        .with_context(|| format!("opening the cache store at {}", args.root.display()))?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let address = listener.local_addr()?;
    tracing::info!(node = %args.node, %address, root = %args.root.display(), peers = args.peers.len(), "node cache serving");
    println!("listening on http://{address}");
    tokio::select! {
        served = tessera_node_cache::server::serve(cache, listener) => served?,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn byte_counts() {
        for (text, want) in [
            ("0", Ok(0)),
            ("1048576", Ok(1 << 20)),
            ("10K", Ok(10_000)),
            ("8Mi", Ok(8 << 20)),
            ("500Gi", Ok(500 << 30)),
            ("2T", Ok(2_000_000_000_000)),
        ] {
            assert_eq!(bytes(text), want, "{text}");
        }
        for bad in [
            "",
            "Gi",
            "10 Gi",
            "10GB",
            "-1",
            "99999999999999999999",
            "18446744073709551615Ki",
        ] {
            assert!(bytes(bad).is_err(), "{bad}");
        }
    }
}
