//! Errors in the shape the Kubernetes API returns them: a `Status` object with a reason and code.

use serde_json::{Value, json};

use super::resources::ResourceType;

/// A failed request, rendered over HTTP as a Kubernetes `Status` body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `(name, group, kind)` as in `Status.details`; `kind` is the resource's plural, as the API does.
    pub details: Option<Box<(String, String, String)>>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        ApiError { code, reason, message, details: None }
    }

    fn about(mut self, rt: &ResourceType, name: &str) -> Self {
        self.details = Some(Box::new((name.to_string(), rt.id.group.clone(), rt.id.plural.clone())));
        self
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", rt.qualified_plural())).about(rt, name)
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", rt.qualified_plural()))
            .about(rt, name)
    }

    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", rt.qualified_plural()),
        )
        .about(rt, name)
    }

    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn invalid(rt: &ResourceType, name: &str, message: String) -> Self {
        Self::new(422, "Invalid", format!("{} \"{name}\" is invalid: {message}", rt.qualified_kind()))
            .about(rt, name)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into())
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized".to_string())
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message.into())
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message.into())
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message.into())
    }

    pub fn no_such_resource() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource".to_string())
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message.into())
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message.into())
    }

    /// The `Status` object the API sends for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            let (name, group, kind) = details.as_ref();
            status["details"] = json!({ "name": name, "group": group, "kind": kind });
        }
        status
    }
}
