//! The agent's auth token, read from scylla-operator's Secret (`auth-token.yaml`:
//! `auth_token: <token>`).
//!
//! The token is a credential: it is never printed, not even in errors about the file it came from.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// A bearer token for the Scylla Manager Agent. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthToken(String);

impl AuthToken {
    /// A token from its text (surrounding whitespace removed). Empty text is no token.
    pub fn new(token: impl Into<String>) -> Option<Self> {
        let token = token.into().trim().to_owned();
        (!token.is_empty()).then_some(Self(token))
    }

    /// The token itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the token replaced: what the agent or a proxy on the way
    /// sends back (an echoed `Authorization` header) must not reach logs or results.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.0, "<redacted>")
    }

    /// Reads the token from scylla-operator's `auth-token.yaml`.
    pub fn from_file(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|err| TokenFileError {
            path: path.display().to_string(),
            problem: match err.kind() {
                std::io::ErrorKind::NotFound => "the file does not exist".to_owned(),
                _ => format!("the file cannot be read: {err}"),
            },
        })?;
        Self::from_yaml(&text).map_err(|problem| TokenFileError { path: path.display().to_string(), problem })
    }

    /// Parses `auth_token: <token>` (the file's text, or the Secret key's value as the controller
    /// reads it). The problem it returns never quotes the input: a malformed file may still hold
    /// the secret.
    pub fn from_yaml(text: &str) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct TokenFile {
            auth_token: Option<String>,
        }
        const EXPECTED: &str = "expected YAML `auth_token: <token>` (scylla-operator's auth-token.yaml)";
        if text.trim().is_empty() {
            return Err(format!("the file is empty; {EXPECTED}"));
        }
        let file: TokenFile = serde_saphyr::from_str(text)
            .map_err(|_| format!("the file is not valid YAML of the right shape; {EXPECTED}"))?;
        let token = file.auth_token.ok_or_else(|| format!("the key `auth_token` is missing; {EXPECTED}"))?;
        let token = Self::new(token).ok_or_else(|| "the key `auth_token` is empty".to_owned())?;
        // No retry can make such a token a valid header value: bad input, not a transport error.
        if token.0.chars().any(char::is_control) {
            return Err("the value of `auth_token` contains control characters (a line break or \
                        tab inside the token?); write the token on one line"
                .to_owned());
        }
        Ok(token)
    }
}

impl fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthToken(<redacted>)")
    }
}

/// The token file could not be used. Names the file and the problem, never the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("auth token file {path}: {problem}")]
pub struct TokenFileError {
    pub path: String,
    pub problem: String,
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_token_with_control_characters_is_refused_without_quoting_it() {
        let problem = AuthToken::from_yaml("auth_token: \"abc\\u0007def\"\n").unwrap_err();
        assert!(problem.contains("control characters"), "{problem}");
        assert!(!problem.contains("abc"), "{problem}");
        assert!(AuthToken::from_yaml("auth_token: abcdef\n").is_ok());
    }

    #[test]
    fn the_token_is_redacted_wherever_it_is_echoed() {
        let token = AuthToken::new("s3cr3t-t0ken").unwrap();
        let echoed = r#"{"message": "bad request: Authorization: Bearer s3cr3t-t0ken (s3cr3t-t0ken)"}"#;
        let redacted = token.redact(echoed);
        assert!(!redacted.contains("s3cr3t-t0ken"), "{redacted}");
        assert_eq!(redacted.matches("<redacted>").count(), 2);
        assert_eq!(token.redact("nothing secret"), "nothing secret");
    }
    use super::*;

    #[test]
    fn parses_the_operator_secret_format() {
        for (yaml, expected) in [
            ("auth_token: s3cr3t\n", Some("s3cr3t")),
            ("auth_token: \"quoted token\"\n", Some("quoted token")),
            ("# written by scylla-operator\nauth_token: abc\nother: 1\n", Some("abc")),
            ("auth_token: '  padded  '\n", Some("padded")),
        ] {
            let token = AuthToken::from_yaml(yaml).ok();
            assert_eq!(token.as_ref().map(AuthToken::expose), expected, "{yaml:?}");
        }
    }

    #[test]
    fn rejects_malformed_files_without_quoting_them() {
        for (yaml, problem) in [
            ("", "empty"),
            ("   \n", "empty"),
            ("token: s3cr3t\n", "missing"),
            ("auth_token: ''\n", "empty"),
            ("auth_token: [s3cr3t\n", "not valid YAML"),
            ("- s3cr3t\n", "not valid YAML"),
        ] {
            let err = AuthToken::from_yaml(yaml).unwrap_err();
            assert!(err.contains(problem), "{yaml:?}: {err}");
            assert!(!err.contains("s3cr3t"), "{yaml:?} leaked the token: {err}");
        }
    }

    #[test]
    fn errors_name_the_file() {
        let err = AuthToken::from_file(Path::new("/nonexistent/auth-token.yaml")).unwrap_err();
        assert_eq!(err.path, "/nonexistent/auth-token.yaml");
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    #[test]
    fn debug_hides_the_token() {
        let token = AuthToken::new("s3cr3t").unwrap();
        assert!(!format!("{token:?}").contains("s3cr3t"));
    }
}
