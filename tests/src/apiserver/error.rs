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
    /// `Status.details`: what the error is about and, for 422 `Invalid`, each field's cause.
    pub details: Option<Box<Details>>,
}

/// `Status.details`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Details {
    pub name: String,
    pub group: String,
    /// The resource's plural for most errors, its kind for `Invalid`, as the API does.
    pub kind: String,
    pub causes: Vec<Cause>,
}

/// One of `Status.details.causes`: a field error as the API reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`…
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

/// The kinds of field error (apimachinery's `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorType {
    Required,
    Invalid,
    TypeInvalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Duplicate,
}

impl ErrorType {
    fn text(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Duplicate => "Duplicate value",
        }
    }

    fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Duplicate => "FieldValueDuplicate",
        }
    }
}

/// A field error (apimachinery's `field.Error`), its bad value already printed as Go prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub kind: ErrorType,
    pub field: String,
    /// `None`: the value is omitted from the message.
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    /// `ErrorBody()`: what `Status.details.causes[].message` says.
    pub fn body(&self) -> String {
        let omit_value = matches!(self.kind, ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong);
        let mut body = match &self.value {
            Some(value) if !omit_value => format!("{}: {value}", self.kind.text()),
            _ => self.kind.text().to_string(),
        };
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        ApiError { code, reason, message, details: None }
    }

    fn about(mut self, rt: &ResourceType, name: &str) -> Self {
        self.details = Some(Box::new(Details {
            name: name.to_string(),
            group: rt.id.group.clone(),
            kind: rt.id.plural.clone(),
            causes: Vec::new(),
        }));
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
        let mut error =
            Self::new(422, "Invalid", format!("{} \"{name}\" is invalid: {message}", rt.qualified_kind()))
                .about(rt, name);
        if let Some(details) = error.details.as_mut() {
            details.kind = rt.kind.clone();
        }
        error
    }

    /// 422 `Invalid` for field errors, as `NewInvalid` builds it: one cause per error, and the
    /// message listing them (once each; in brackets when there are several).
    pub(crate) fn invalid_fields(rt: &ResourceType, name: &str, errors: &[FieldError]) -> Self {
        let mut listed: Vec<String> = Vec::new();
        for error in errors {
            let line = format!("{}: {}", error.field, error.body());
            if !listed.contains(&line) {
                listed.push(line);
            }
        }
        let message = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut error = Self::invalid(rt, name, message);
        if let Some(details) = error.details.as_mut() {
            details.causes = errors
                .iter()
                .map(|e| Cause { reason: e.kind.reason(), message: e.body(), field: e.field.clone() })
                .collect();
        }
        error
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
            status["details"] = json!({ "name": details.name, "group": details.group, "kind": details.kind });
            if !details.causes.is_empty() {
                let causes: Vec<Value> = details
                    .causes
                    .iter()
                    .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
                    .collect();
                status["details"]["causes"] = causes.into();
            }
        }
        status
    }
}
