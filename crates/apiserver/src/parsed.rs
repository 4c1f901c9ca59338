//! A request's path and query, parsed once as the request arrives and carried in its
//! extensions, so that the request metrics, the audit and the router read one target instead of
//! each parsing the URL again.
//!
//! Knows only the parse (`tessera_api::request`); what each reader makes of it is its own.

use http::{Extensions, Uri};
use tessera_api::error::ApiResult;
use tessera_api::request::{Query, Target, parse_path};

/// The parsed path (or why it does not parse) and query of a request.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub target: ApiResult<Target>,
    pub query: Query,
}

impl Parsed {
    /// Parses `uri`.
    pub fn of(uri: &Uri) -> Parsed {
        Parsed {
            target: parse_path(uri.path()),
            query: Query::parse(uri.query()),
        }
    }

    /// The parse the request carries, or a fresh one of `uri` for a request that entered
    /// without it (a test calling a handler directly).
    pub fn from_request(extensions: &Extensions, uri: &Uri) -> Parsed {
        extensions
            .get::<Parsed>()
            .cloned()
            .unwrap_or_else(|| Parsed::of(uri))
    }
}
