//! kube-apiserver's audit logging, the pure part: the `audit.k8s.io/v1` `Policy` read from its
//! file and validated (`policy`), the rule that applies to a request (upstream's
//! `policy.EvaluatePolicyRule`: first matching rule wins, no match is `None`), and the
//! `audit.k8s.io/v1` `Event` a request's stage is written as (`event`).
//!
//! Deliberately knows nothing of HTTP, files, channels or the clock: the shell
//! (`tessera_apiserver::audit`) hands in the request's attributes, the time and the audit ID,
//! and writes the lines this module renders. Lives in `tessera-api` because a policy matches
//! on the attributes RBAC authorizes (`rbac::Attributes`) and the authenticated user
//! (`authn::UserInfo`), which are this crate's.

pub mod event;
pub mod policy;

pub use event::{Event, ObjectRef};
pub use policy::{Policy, PolicyError, RequestAuditConfig, parse_policy};

/// How much of a request is recorded (`audit.k8s.io/v1` `Level`), in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Level {
    /// Not logged.
    #[default]
    None,
    /// Request metadata (user, timestamp, resource, verb) but not the bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata, the request body and the response body.
    RequestResponse,
}

impl Level {
    /// Every level, as upstream lists them.
    pub const ALL: [Level; 4] = [
        Level::None,
        Level::Metadata,
        Level::Request,
        Level::RequestResponse,
    ];

    /// The level's name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }

    /// The level a name stands for.
    pub fn parse(text: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == text)
    }
}

/// A stage of a request's handling at which an event may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// As soon as the handler receives the request.
    RequestReceived,
    /// Response headers sent, body not yet (long-running requests only: watch, exec, logs).
    ResponseStarted,
    /// The response is complete.
    ResponseComplete,
    /// The handler panicked.
    Panic,
}

impl Stage {
    /// Every stage, as upstream lists them.
    pub const ALL: [Stage; 4] = [
        Stage::RequestReceived,
        Stage::ResponseStarted,
        Stage::ResponseComplete,
        Stage::Panic,
    ];

    /// The stage's name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }

    /// The stage a name stands for.
    pub fn parse(text: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// Whether upstream's `BasicLongRunningRequestCheck` (verbs `watch`, `proxy`; subresources
/// `attach`, `exec`, `proxy`, `log`, `portforward`) counts a request as long-running: such a
/// request gets a `ResponseStarted` event when its headers go out.
pub fn long_running(attributes: &crate::rbac::Attributes) -> bool {
    matches!(attributes.verb.as_str(), "watch" | "proxy")
        || (attributes.resource_request
            && matches!(
                attributes.subresource.as_str(),
                "attach" | "exec" | "proxy" | "log" | "portforward"
            ))
}
