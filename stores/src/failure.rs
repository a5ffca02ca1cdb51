//! Why a call to a data store failed, with its retry class: the runner turns it into its result and
//! exit code (1 retryable, 2 bad input); the controller into a message.

use groundskeeper_protocol::result::{ErrorKind, ErrorReason};

/// A failure with its retry class, as every subcommand reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
    /// The cause, where the controller tells it apart ([`ErrorReason`]); kept by every wrapping
    /// that adds context to the message (`Failure { message, ..failure }`).
    pub reason: Option<ErrorReason>,
}

/// The longest message a failure carries: what a data store or something in between sends back
/// (an etcd error's text, a proxy's page) ends up in logs, results and conditions, and none of it
/// needs more to be understood.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self { kind: ErrorKind::BadInput, message: shown(message.into()), reason: None }
    }

    pub fn retryable(message: impl Into<String>) -> Self {
        Self { kind: ErrorKind::Retryable, message: shown(message.into()), reason: None }
    }

    pub fn with_reason(self, reason: ErrorReason) -> Self {
        Self { reason: Some(reason), ..self }
    }

    /// As an I/O error (`InvalidData`) for a reader's caller, carrying the failure whole (its
    /// class and reason); [`Failure::from_io`] takes it out again.
    pub fn into_io(self) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, self)
    }

    /// The failure an I/O error made by [`Failure::into_io`] carries.
    pub fn from_io(error: &std::io::Error) -> Option<Failure> {
        error.get_ref().and_then(|inner| inner.downcast_ref::<Failure>()).cloned()
    }
}

/// A message as it may be shown: URLs without their user-info, bounded.
pub fn shown(message: String) -> String {
    bounded(without_userinfo(&message))
}

/// `text` with the user-info (`user:password@`) of every URL in it removed: an endpoint given as
/// `https://user:pass@host` must not carry its password into a log, a result or a condition.
pub fn without_userinfo(text: &str) -> String {
    const AUTHORITY_ENDS: &[char] =
        &['/', '?', '#', '"', '\'', '<', '>', '`', '(', ')', ',', '{', '}', '|', '\\'];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + "://".len());
        out.push_str(before);
        let authority_len =
            after.find(|c: char| c.is_whitespace() || AUTHORITY_ENDS.contains(&c)).unwrap_or(after.len());
        let authority = &after[..authority_len];
        match authority.rfind('@') {
            Some(user_info_end) => out.push_str(&authority[user_info_end + 1..]),
            None => out.push_str(authority),
        }
        rest = &after[authority_len..];
    }
    out.push_str(rest);
    out
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
    fn urls_lose_their_user_info_and_nothing_else() {
        for (text, shown) in [
            (
                "cannot reach https://user:pass@s3.local:9000/b: refused",
                "cannot reach https://s3.local:9000/b: refused",
            ),
            ("(https://u:p%40ss@host)", "(https://host)"),
            ("http://[::1]:80/x and s3://bucket/prefix", "http://[::1]:80/x and s3://bucket/prefix"),
            ("a@b: no URL here, mail@host.example", "a@b: no URL here, mail@host.example"),
            (
                "error sending request for url (http://k:s@127.0.0.1:1/b?x=1)",
                "error sending request for url (http://127.0.0.1:1/b?x=1)",
            ),
            ("two: http://a:b@h1 http://c@h2/", "two: http://h1 http://h2/"),
            ("ends with ://", "ends with ://"),
        ] {
            assert_eq!(without_userinfo(text), shown, "{text}");
            assert_eq!(Failure::retryable(text).message, shown, "{text}");
        }
    }

    #[test]
    fn a_failure_crosses_an_io_error_whole() {
        let failure = Failure::bad_input("snapshot s.db is encrypted").with_reason(ErrorReason::KeyMissing);
        let io = failure.clone().into_io();
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(io.to_string(), "snapshot s.db is encrypted");
        assert_eq!(Failure::from_io(&io), Some(failure));
        assert_eq!(Failure::from_io(&std::io::Error::other("disk")), None);
    }

    #[test]
    fn messages_are_bounded_on_a_character_boundary() {
        assert_eq!(Failure::retryable("short").message, "short");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let message = Failure::bad_input(long.clone()).message;
        assert!(message.len() < MAX_MESSAGE_BYTES + 40, "{}", message.len());
        assert!(message.ends_with(&format!("… ({} more bytes not shown)", long.len() - MAX_MESSAGE_BYTES)));
    }
}
