//! Kubernetes' IP and CIDR libraries: `ip(s)`, `isIP(s)`, `ip.isCanonical(s)`, and on an IP
//! `family()`, `isUnspecified()`, `isLoopback()`, `isLinkLocalMulticast()`,
//! `isLinkLocalUnicast()`, `isGlobalUnicast()`; `cidr(s)`, `isCIDR(s)`, and on a CIDR
//! `containsIP(ip or string)`, `containsCIDR(cidr or string)`, `ip()`, `masked()`,
//! `prefixLength()`; `string()` of either. As upstream (Go's `netip`), IPv4-mapped IPv6
//! addresses, zones and leading zeros are refused; a CIDR keeps the address it was written
//! with (`masked()` clears the host bits).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use cel::common::types::Type;
use cel::common::value::{CowVal, Val};
use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{DeclarationError, Env, ExecutionError};

use crate::Library;

const IP_TYPE: &str = "net.IP";
const CIDR_TYPE: &str = "net.CIDR";

/// An IP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ip(IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE
    }
}

/// A prefix: the address as written and the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr(IpAddr, u8);

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE
    }
}

fn parse_ip(text: &str) -> Result<IpAddr, String> {
    let ip: IpAddr = text
        .parse()
        .map_err(|_| format!("IP Address {text:?} parse error during conversion from string"))?;
    if let IpAddr::V6(v6) = ip
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {text:?} is not allowed"));
    }
    Ok(ip)
}

fn bits(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let error = || format!("network address {text:?} parse error during conversion from string");
    let (address, length) = text.split_once('/').ok_or_else(error)?;
    let ip = parse_ip(address).map_err(|_| error())?;
    let valid_length = !length.is_empty()
        && length.bytes().all(|b| b.is_ascii_digit())
        && (length == "0" || !length.starts_with('0'));
    let length: u8 = valid_length
        .then(|| length.parse().ok())
        .flatten()
        .filter(|l| *l <= bits(ip))
        .ok_or_else(error)?;
    Ok(Cidr(ip, length))
}

fn as_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn masked(Cidr(ip, length): Cidr) -> Cidr {
    let width = u32::from(bits(ip));
    let host_bits = width - u32::from(length);
    let mask = if host_bits >= 128 {
        0
    } else {
        !0u128 << host_bits
    };
    let value = as_u128(ip) & mask;
    let ip = match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(value).unwrap_or(0))),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(value)),
    };
    Cidr(ip, length)
}

fn contains_ip(cidr: Cidr, ip: IpAddr) -> bool {
    bits(cidr.0) == bits(ip) && masked(cidr) == masked(Cidr(ip, cidr.1))
}

fn is_link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.octets()[0] == 0xff && v6.octets()[1] & 0x0f == 0x02,
    }
}

fn is_link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_global_unicast(ip: IpAddr) -> bool {
    let broadcast = ip == IpAddr::V4(Ipv4Addr::BROADCAST);
    !broadcast
        && !ip.is_unspecified()
        && !ip.is_loopback()
        && !ip.is_multicast()
        && !is_link_local_unicast(ip)
}

type Opq = Arc<dyn Opaque>;

fn fail(function: &str) -> impl Fn(String) -> ExecutionError + '_ {
    move |message| ExecutionError::function_error(function, message)
}

fn get_ip(function: &str, value: &Opq) -> Result<IpAddr, ExecutionError> {
    value
        .downcast_ref::<Ip>()
        .map(|ip| ip.0)
        .ok_or_else(|| ExecutionError::function_error(function, "expects an IP address"))
}

fn get_cidr(function: &str, value: &Opq) -> Result<Cidr, ExecutionError> {
    value
        .downcast_ref::<Cidr>()
        .copied()
        .ok_or_else(|| ExecutionError::function_error(function, "expects a CIDR"))
}

fn ip_predicate(library: &mut Library, name: &'static str, predicate: fn(IpAddr) -> bool) {
    library.add(name, move |This(this): This<Opq>| {
        get_ip(name, &this).map(predicate)
    });
}

pub(crate) fn register(library: &mut Library) {
    // `ip(s)` parses; `cidr.ip()` is the CIDR's address.
    library.add("ip", |This(this): This<Value>| match this {
        Value::String(s) => parse_ip(&s)
            .map(|ip| crate::opaque(Ip(ip)))
            .map_err(fail("ip")),
        Value::Opaque(o) => get_cidr("ip", &o).map(|c| crate::opaque(Ip(c.0))),
        _ => Err(ExecutionError::function_error(
            "ip",
            "expects a string or a CIDR",
        )),
    });
    library.add("isIP", |s: Arc<String>| parse_ip(&s).is_ok());
    library.add("ip.isCanonical", |s: Arc<String>| {
        parse_ip(&s)
            .map(|ip| ip.to_string() == *s)
            .map_err(fail("ip.isCanonical"))
    });
    library.add("family", |This(this): This<Opq>| {
        get_ip("family", &this).map(|ip| if ip.is_ipv4() { 4i64 } else { 6 })
    });
    ip_predicate(library, "isUnspecified", |ip| ip.is_unspecified());
    ip_predicate(library, "isLoopback", |ip| ip.is_loopback());
    ip_predicate(library, "isLinkLocalMulticast", is_link_local_multicast);
    ip_predicate(library, "isLinkLocalUnicast", is_link_local_unicast);
    ip_predicate(library, "isGlobalUnicast", is_global_unicast);

    library.add("cidr", |s: Arc<String>| {
        parse_cidr(&s).map(crate::opaque).map_err(fail("cidr"))
    });
    library.add("isCIDR", |s: Arc<String>| parse_cidr(&s).is_ok());
    library.add("containsIP", |This(this): This<Opq>, other: Value| {
        let cidr = get_cidr("containsIP", &this)?;
        let ip = match other {
            Value::String(s) => parse_ip(&s).map_err(fail("containsIP"))?,
            Value::Opaque(o) => get_ip("containsIP", &o)?,
            _ => return Err(fail("containsIP")("expects an IP or a string".into())),
        };
        Ok(contains_ip(cidr, ip))
    });
    library.add("containsCIDR", |This(this): This<Opq>, other: Value| {
        let cidr = get_cidr("containsCIDR", &this)?;
        let other = match other {
            Value::String(s) => parse_cidr(&s).map_err(fail("containsCIDR"))?,
            Value::Opaque(o) => get_cidr("containsCIDR", &o)?,
            _ => return Err(fail("containsCIDR")("expects a CIDR or a string".into())),
        };
        Ok(cidr.1 <= other.1 && contains_ip(cidr, other.0))
    });
    library.add("masked", |This(this): This<Opq>| {
        get_cidr("masked", &this).map(|c| crate::opaque(masked(c)))
    });
    library.add("prefixLength", |This(this): This<Opq>| {
        get_cidr("prefixLength", &this).map(|c| i64::from(c.1))
    });
}

/// `string(ip)` and `string(cidr)`: overloads of the standard library's `string`.
fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [value] = args.as_slice() else {
        return Err(ExecutionError::invalid_argument_count(1, args.len()));
    };
    let text = match Value::try_from(value.as_ref() as &dyn Val)? {
        Value::Opaque(o) => match (o.downcast_ref::<Ip>(), o.downcast_ref::<Cidr>()) {
            (Some(ip), _) => ip.0.to_string(),
            (_, Some(Cidr(ip, length))) => format!("{ip}/{length}"),
            _ => return Err(fail("string")("expects an IP or a CIDR".into())),
        },
        _ => return Err(fail("string")("expects an IP or a CIDR".into())),
    };
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(Value::String(
        Arc::new(text),
    ))?))
}

pub(crate) fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "string",
        "net_ip_to_string",
        vec![Type::new_opaque_type(IP_TYPE)],
        to_string,
    )?;
    env.add_overload(
        "string",
        "net_cidr_to_string",
        vec![Type::new_opaque_type(CIDR_TYPE)],
        to_string,
    )
}
