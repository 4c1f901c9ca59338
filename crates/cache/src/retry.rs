//! How a fetch's outcome is treated: which origin answers are worth retrying (with backoff)
//! and which fail the download at once (and are remembered by the negative cache).
//!
//! Throttling and server-side trouble (408, 425, 429, 500, 502, 503, 504), timeouts, refused or
//! reset connections and bodies cut short are transient: the shell retries them after
//! [`crate::single_flight::Backoff`]'s jittered delay. Refusals that another try cannot change
//! (403 on an expired or wrong signature, 404, 401, 410, 416 and the other 4xx) fail the
//! download with an error naming the status. A success is 206 for a range, or 200 when the
//! range asked for is the whole file (an origin ignoring `Range` on a whole-file request).
//!
//! This module does not send requests or sleep; statuses and error kinds are inputs.

/// The verdict on one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Use the body.
    Success,
    /// Try again after the backoff delay.
    Retry,
    /// Give up: the download fails with this status.
    Fail,
}

/// The verdict on an HTTP status answering a `Range` GET; `whole_file` says the range asked for
/// covers the whole file (so a plain 200 carries exactly what was asked).
pub fn classify_status(status: u16, whole_file: bool) -> Verdict {
    match status {
        206 => Verdict::Success,
        200 if whole_file => Verdict::Success,
        408 | 425 | 429 | 500 | 502 | 503 | 504 => Verdict::Retry,
        _ => Verdict::Fail,
    }
}

/// Transport failures, all transient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    Connect,
    Timeout,
    /// The body ended before its length (a truncated piece).
    ShortBody,
    Reset,
}

/// The verdict on a transport failure: always [`Verdict::Retry`].
pub fn classify_transport(_failure: TransportFailure) -> Verdict {
    Verdict::Retry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table() {
        for (status, whole, want) in [
            (206, false, Verdict::Success),
            (206, true, Verdict::Success),
            (200, true, Verdict::Success),
            (200, false, Verdict::Fail), // the origin ignored Range: not what was asked
            (503, false, Verdict::Retry),
            (500, false, Verdict::Retry),
            (502, false, Verdict::Retry),
            (504, false, Verdict::Retry),
            (429, false, Verdict::Retry),
            (408, false, Verdict::Retry),
            (403, false, Verdict::Fail),
            (401, false, Verdict::Fail),
            (404, false, Verdict::Fail),
            (410, false, Verdict::Fail),
            (416, false, Verdict::Fail),
            (301, false, Verdict::Fail),
        ] {
            assert_eq!(classify_status(status, whole), want, "{status} {whole}");
        }
        for failure in [
            TransportFailure::Connect,
            TransportFailure::Timeout,
            TransportFailure::ShortBody,
            TransportFailure::Reset,
        ] {
            assert_eq!(classify_transport(failure), Verdict::Retry);
        }
    }
}
