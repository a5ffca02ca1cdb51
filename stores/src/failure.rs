//! Why a call to a data store failed, with its retry class: the runner turns it into its result and
//! exit code (1 retryable, 2 bad input); the controller into a message.

use groundskeeper_protocol::result::ErrorKind;

/// A failure with its retry class, as every subcommand reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
}

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self { kind: ErrorKind::BadInput, message: message.into() }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Self { kind: ErrorKind::Retryable, message: message.into() }
    }
}
