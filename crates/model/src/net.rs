//! IPv4 networks and port ranges as the topology file and the API server read them: parsing
//! with messages that say what is wrong, membership, overlap and offsets.
//!
//! Pure arithmetic; knows nothing about nodes, Services or who holds an address.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::Deserialize;

/// An IPv4 network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Cidr {
    network: u32,
    prefix: u8,
}

impl FromStr for Ipv4Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (address, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not an IPv4 CIDR (a.b.c.d/n)"))?;
        let address: Ipv4Addr = address
            .parse()
            .map_err(|_| format!("{text:?}: {address:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to 32"))?;
        let mask = Ipv4Cidr::mask(prefix);
        let address = u32::from(address);
        if address & !mask != 0 {
            return Err(format!(
                "{text:?} has host bits set (the network is {}/{prefix})",
                Ipv4Addr::from(address & mask)
            ));
        }
        Ok(Ipv4Cidr {
            network: address,
            prefix,
        })
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

impl<'de> Deserialize<'de> for Ipv4Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Ipv4Cidr {
    /// The network `a.b.c.d/prefix`; host bits are cleared.
    pub const fn new(address: Ipv4Addr, prefix: u8) -> Ipv4Cidr {
        let prefix = if prefix > 32 { 32 } else { prefix };
        Ipv4Cidr {
            network: address.to_bits() & Ipv4Cidr::mask(prefix),
            prefix,
        }
    }

    const fn mask(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        }
    }

    fn last(&self) -> u32 {
        self.network | !Ipv4Cidr::mask(self.prefix)
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether the two networks share an address.
    pub fn overlaps(&self, other: &Ipv4Cidr) -> bool {
        self.network <= other.last() && other.network <= self.last()
    }

    /// Whether `address` lies in the network.
    pub fn contains(&self, address: Ipv4Addr) -> bool {
        let address = u32::from(address);
        self.network <= address && address <= self.last()
    }

    /// How far `address` lies after the network address, when it lies in the network.
    pub fn offset_of(&self, address: Ipv4Addr) -> Option<u32> {
        self.contains(address)
            .then(|| u32::from(address) - self.network)
    }

    /// How many /24 subnets it holds (0 when it is smaller than a /24).
    pub fn subnets_24(&self) -> u64 {
        if self.prefix > 24 {
            0
        } else {
            1u64 << (24 - self.prefix)
        }
    }

    /// How many addresses it holds.
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// The `index`-th /24 subnet's first address.
    pub fn subnet_24(&self, index: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.network.wrapping_add(index << 8))
    }

    /// The address `offset` after the network address.
    pub fn address(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.network.wrapping_add(offset))
    }
}

/// An inclusive range of ports, written `30000-32767` (or a single port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// The first port.
    pub base: u16,
    /// How many ports, at least 1.
    pub size: u16,
}

impl PortRange {
    /// The ports `first..=last`; `None` when `last < first`.
    pub fn new(first: u16, last: u16) -> Option<PortRange> {
        (first <= last && !(first == 0 && last == u16::MAX)).then(|| PortRange {
            base: first,
            size: last - first + 1,
        })
    }

    /// The last port.
    pub fn last(&self) -> u16 {
        self.base + (self.size - 1)
    }

    /// Whether `port` lies in the range.
    pub fn contains(&self, port: i64) -> bool {
        i64::from(self.base) <= port && port <= i64::from(self.last())
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.base, self.last())
    }
}

impl FromStr for PortRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let port = |part: &str| {
            part.trim()
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{text:?}: {part:?} is not a port (1 to 65535)"))
        };
        let (first, last) = match text.split_once('-') {
            Some((first, last)) => (port(first)?, port(last)?),
            None => {
                let only = port(text)?;
                (only, only)
            }
        };
        PortRange::new(first, last)
            .ok_or_else(|| format!("{text:?}: the last port is before the first"))
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_and_overlap() {
        let cidr = |text: &str| text.parse::<Ipv4Cidr>();
        let table = [
            ("10.244.0.0/16", Ok("10.244.0.0/16")),
            (
                "10.244.1.0/16",
                Err("has host bits set (the network is 10.244.0.0/16)"),
            ),
            ("10.244.0.0", Err("is not an IPv4 CIDR")),
            ("10.300.0.0/16", Err("is not an IPv4 address")),
            ("10.0.0.0/33", Err("prefix length must be 0 to 32")),
        ];
        for (text, want) in table {
            match (cidr(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got.to_string(), want),
                (Err(got), Err(want)) => assert!(got.contains(want), "{got}"),
                (got, want) => panic!("{text}: {got:?} vs {want:?}"),
            }
        }
        let a = cidr("10.0.0.0/8").expect("cidr");
        let b = cidr("10.244.0.0/16").expect("cidr");
        let c = cidr("192.168.0.0/16").expect("cidr");
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&c));
        assert_eq!(b.offset_of(Ipv4Addr::new(10, 244, 1, 2)), Some(258));
        assert_eq!(b.offset_of(Ipv4Addr::new(10, 245, 0, 0)), None);
        assert_eq!(
            Ipv4Cidr::new(Ipv4Addr::new(10, 96, 3, 4), 12).to_string(),
            "10.96.0.0/12"
        );
    }

    #[test]
    fn port_ranges_parse() {
        let table = [
            ("30000-32767", Ok("30000-32767")),
            ("8080", Ok("8080-8080")),
            ("32767-30000", Err("the last port is before the first")),
            ("0-100", Err("\"0\" is not a port")),
            ("30000-70000", Err("\"70000\" is not a port")),
            ("a-b", Err("is not a port")),
        ];
        for (text, want) in table {
            match (text.parse::<PortRange>(), want) {
                (Ok(got), Ok(want)) => assert_eq!(got.to_string(), want),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
                (got, want) => panic!("{text}: {got:?} vs {want:?}"),
            }
        }
        let range: PortRange = "30000-32767".parse().expect("range");
        assert_eq!(range.size, 2768);
        assert!(range.contains(30000) && range.contains(32767) && !range.contains(32768));
    }
}
