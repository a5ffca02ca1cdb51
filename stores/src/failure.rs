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

/// The longest message a failure carries: what a data store or something in between sends back
/// (an etcd error's text, a proxy's page) ends up in logs, results and conditions, and none of it
/// needs more to be understood.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self { kind: ErrorKind::BadInput, message: bounded(message.into()) }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Self { kind: ErrorKind::Retryable, message: bounded(message.into()) }
    }
}

/// `message`, cut at [`MAX_MESSAGE_BYTES`] (on a character boundary) with the length cut off.
fn bounded(mut message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let mut cut = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let dropped = message.len() - cut;
    message.truncate(cut);
    message.push_str(&format!("… ({dropped} more bytes not shown)"));
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_bounded_on_a_character_boundary() {
        assert_eq!(Failure::retryable("short").message, "short");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let message = Failure::bad_input(long.clone()).message;
        assert!(message.len() < MAX_MESSAGE_BYTES + 40, "{}", message.len());
        assert!(message.ends_with(&format!("… ({} more bytes not shown)", long.len() - MAX_MESSAGE_BYTES)));
    }
}
