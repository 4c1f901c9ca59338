//! CIDR blocks (IPv4 and IPv6) and the `ipBlock` peer: a block minus its exceptions. Knows
//! nothing of policies; parsing follows `netutils.ParseCIDRSloppy`, which upstream's
//! validation of NetworkPolicy's legacy CIDR fields uses: host bits may be set (the block is
//! its network), and IPv4 octets and the prefix length may have leading zeros.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A parsed CIDR block: an address family, its network bits and the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    v6: bool,
    network: u128,
    prefix: u8,
}

/// Why a string is not a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CIDR address: {0}")]
pub struct CidrError(pub String);

fn bits(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (false, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (true, u128::from(v6)),
    }
}

fn mask(v6: bool, prefix: u8) -> u128 {
    let width: u32 = if v6 { 128 } else { 32 };
    let host = width - u32::from(prefix);
    let all = if v6 { u128::MAX } else { u128::from(u32::MAX) };
    if host >= 128 {
        0
    } else {
        (all >> host) << host
    }
}

impl Cidr {
    /// Whether `ip` lies in the block (an IPv4 address never lies in an IPv6 block).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (v6, value) = bits(ip);
        v6 == self.v6 && value & mask(self.v6, self.prefix) == self.network
    }

    /// Whether every address of `other` lies in this block.
    pub fn covers(&self, other: &Cidr) -> bool {
        other.v6 == self.v6
            && other.prefix >= self.prefix
            && other.network & mask(self.v6, self.prefix) == self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether the block is IPv6.
    pub fn is_v6(&self) -> bool {
        self.v6
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = || CidrError(text.to_string());
        let (address, prefix) = text.split_once('/').ok_or_else(err)?;
        let ip: IpAddr = address
            .parse()
            .ok()
            .or_else(|| sloppy_ipv4(address))
            .ok_or_else(err)?;
        // Decimal digits only: no sign, no spaces.
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let prefix: u8 = prefix.parse().map_err(|_| err())?;
        let v6 = matches!(ip, IpAddr::V6(_));
        if prefix > if v6 { 128 } else { 32 } {
            return Err(err());
        }
        let (_, value) = bits(ip);
        Ok(Cidr {
            v6,
            network: value & mask(v6, prefix),
            prefix,
        })
    }
}

/// An IPv4 address whose octets have leading zeros (`010.0.0.1`), read as decimal.
fn sloppy_ipv4(text: &str) -> Option<IpAddr> {
    let octets: Vec<u8> = text
        .split('.')
        .map(|part| {
            (!part.is_empty() && part.len() <= 3 && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse().ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    let octets: [u8; 4] = octets.try_into().ok()?;
    Some(IpAddr::from(octets))
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.v6 {
            write!(
                f,
                "{}/{}",
                std::net::Ipv6Addr::from(self.network),
                self.prefix
            )
        } else {
            let v4 = u32::try_from(self.network).unwrap_or_default();
            write!(f, "{}/{}", std::net::Ipv4Addr::from(v4), self.prefix)
        }
    }
}

/// An `ipBlock`: the addresses of `cidr` that lie in none of `except`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpBlock {
    /// The block.
    pub cidr: Cidr,
    /// The exceptions.
    pub except: Vec<Cidr>,
}

impl IpBlock {
    /// Parses a block and its exceptions; `None` when any of them is not a CIDR (a stored
    /// policy that validation would refuse matches nothing).
    pub fn parse(cidr: &str, except: &[String]) -> Option<IpBlock> {
        Some(IpBlock {
            cidr: cidr.parse().ok()?,
            except: except
                .iter()
                .map(|e| e.parse().ok())
                .collect::<Option<Vec<_>>>()?,
        })
    }

    /// Whether `ip` is in the block and in none of its exceptions.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.cidr.contains(ip) && !self.except.iter().any(|e| e.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_contain_their_addresses() {
        let table = [
            ("10.0.0.0/8", "10.1.2.3", true),
            ("10.0.0.0/8", "11.0.0.1", false),
            ("10.1.2.3/32", "10.1.2.3", true),
            ("10.1.2.3/32", "10.1.2.4", false),
            ("0.0.0.0/0", "192.168.1.1", true),
            ("0.0.0.0/0", "fd00::1", false),
            ("fd00::/8", "fd00::1", true),
            ("fd00::/8", "fe00::1", false),
            ("::/0", "10.0.0.1", false),
            ("10.1.2.3/8", "10.200.0.1", true),
            ("fd00::1/128", "fd00::1", true),
            ("010.001.0.0/016", "10.1.200.1", true),
        ];
        for (cidr, ip, want) in table {
            let cidr: Cidr = cidr.parse().expect(cidr);
            let ip: IpAddr = ip.parse().expect(ip);
            assert_eq!(cidr.contains(ip), want, "{cidr} ∋ {ip}");
        }
    }

    #[test]
    fn malformed_blocks_are_refused() {
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "10.0.0/8",
            "fd00::/129",
            "10.0.0.0/-1",
            "10.0.0.0/+8",
            "010.0.0.256/8",
            "10.0.0.0/ 8",
            "",
            "/8",
            "10.0.0.0/",
            "a.b.c.d/8",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn covers_and_exceptions() {
        let block: Cidr = "10.0.0.0/16".parse().expect("cidr");
        let inner: Cidr = "10.0.1.0/24".parse().expect("cidr");
        let outer: Cidr = "10.0.0.0/8".parse().expect("cidr");
        assert!(block.covers(&inner));
        assert!(!block.covers(&outer));
        let ip_block = IpBlock::parse("10.0.0.0/16", &["10.0.1.0/24".into()]).expect("block");
        assert!(ip_block.contains("10.0.2.1".parse().expect("ip")));
        assert!(!ip_block.contains("10.0.1.1".parse().expect("ip")));
        assert!(IpBlock::parse("10.0.0.0/16", &["nope".into()]).is_none());
        assert_eq!(block.to_string(), "10.0.0.0/16");
        assert_eq!(
            "fd00::5/8".parse::<Cidr>().expect("cidr").to_string(),
            "fd00::/8"
        );
    }
}
