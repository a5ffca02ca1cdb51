//! The token-ring hash, byte-compatible with scylla-operator's annotations.
//!
//! scylla-operator serialises the ring (as returned by `GET /storage_service/tokens`, in Scylla's
//! order) with Go's `json.Encoder`, which writes compact JSON followed by one `\n`, hashes that with
//! SHA-512 and encodes the digest as standard padded base64. Tokens are decimal int64 strings, for
//! which Go's and serde_json's escaping agree; anything else is rejected rather than hashed into a
//! value scylla-operator would never produce.

use base64::Engine;
use sha2::{Digest, Sha512};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RingHashError {
    #[error("token ring is not a JSON array of strings: {0}")]
    NotAnArrayOfStrings(String),
    #[error("token {index} ({token:?}) is not a decimal int64")]
    NotAToken { index: usize, token: String },
}

/// Hash of a token ring, in Scylla's order (do not sort: the order is part of the hash).
pub fn ring_hash<S: AsRef<str>>(tokens: &[S]) -> Result<String, RingHashError> {
    for (index, token) in tokens.iter().enumerate() {
        let token = token.as_ref();
        if token.parse::<i64>().is_err() || token.starts_with('+') {
            return Err(RingHashError::NotAToken { index, token: token.to_owned() });
        }
    }
    let tokens: Vec<&str> = tokens.iter().map(AsRef::as_ref).collect();
    let mut serialised = serde_json::to_vec(&tokens).expect("a list of strings always serialises");
    serialised.push(b'\n');
    Ok(base64::engine::general_purpose::STANDARD.encode(Sha512::digest(&serialised)))
}

/// Hash of a token ring given as the JSON body of `GET /storage_service/tokens`.
pub fn ring_hash_from_json(body: &str) -> Result<String, RingHashError> {
    let tokens: Vec<String> =
        serde_json::from_str(body).map_err(|err| RingHashError::NotAnArrayOfStrings(err.to_string()))?;
    ring_hash(&tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_documented_example() {
        assert_eq!(
            ring_hash(&["-1", "0", "1"]).unwrap(),
            "znqy/aBReVlJDtCopwdiTnIM/tKxDLyBD1vT1hPmz5EYmdT7+UkkYYNPRleGTwkiVwsMedQOnzz9VJGQYMEcNg=="
        );
    }

    #[test]
    fn is_88_characters_of_padded_base64() {
        let hash = ring_hash(&["9223372036854775807", "-9223372036854775808"]).unwrap();
        assert_eq!(hash.len(), 88);
        assert!(hash.ends_with("=="));
    }

    #[test]
    fn order_matters() {
        assert_ne!(ring_hash(&["0", "1"]).unwrap(), ring_hash(&["1", "0"]).unwrap());
    }

    #[test]
    fn empty_ring_hashes_the_empty_array() {
        // `[]\n`, as Go's encoder writes an empty slice that is not nil.
        let expected = base64::engine::general_purpose::STANDARD.encode(Sha512::digest(b"[]\n"));
        assert_eq!(ring_hash::<&str>(&[]).unwrap(), expected);
    }

    #[test]
    fn json_body_with_whitespace_hashes_like_compact() {
        assert_eq!(
            ring_hash_from_json("[ \"-1\",\n \"0\", \"1\" ]").unwrap(),
            ring_hash(&["-1", "0", "1"]).unwrap()
        );
    }

    #[test]
    fn rejects_what_scylla_never_returns() {
        for (body, wanted) in [
            ("[1, 2]", "not a JSON array of strings"),
            ("{\"a\": 1}", "not a JSON array of strings"),
            ("[\"1\", \"x\"]", "token 1 (\"x\") is not a decimal int64"),
            ("[\"+1\"]", "token 0 (\"+1\") is not a decimal int64"),
            ("[\"9223372036854775808\"]", "is not a decimal int64"),
        ] {
            let err = ring_hash_from_json(body).unwrap_err().to_string();
            assert!(err.contains(wanted), "{body}: {err}");
        }
    }
}
