//! The HTTP and store glue of API errors: an [`ApiError`] (defined in `tessera-api`, with
//! no knowledge of HTTP) rendered as a `Status` response, and the store's failures mapped to
//! API errors (a compacted revision is `410 Expired`, anything else a logged 500).

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use tessera_api::error::{ApiError, ApiResult};
use tessera_store::StoreError;

/// An [`ApiError`] on its way to the client: the shell's type that renders it as a response
/// (the orphan rule keeps `IntoResponse` off `ApiError` itself). `?` converts.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct HttpError(pub ApiError);

impl From<ApiError> for HttpError {
    fn from(error: ApiError) -> HttpError {
        HttpError(error)
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.0.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.0.to_status().to_string();
        let response = (
            code,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        crate::audit::with_response_annotations(response, &self.0.audit_annotations)
    }
}

/// The API error a store failure answers.
pub fn store_error(error: StoreError) -> ApiError {
    match error {
        StoreError::Gone { requested, oldest } => {
            ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
        }
        other => {
            tracing::error!(error = %other, "store failure");
            ApiError::internal(other.to_string())
        }
    }
}

/// `?` for store results in code that answers [`ApiResult`]s.
pub trait StoreResultExt<T> {
    /// The result with a store failure mapped by [`store_error`].
    fn or_api(self) -> ApiResult<T>;
}

impl<T> StoreResultExt<T> for Result<T, StoreError> {
    fn or_api(self) -> ApiResult<T> {
        self.map_err(store_error)
    }
}
