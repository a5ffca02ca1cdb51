//! The controller's error type.
//!
//! Every variant names the object (and, where it applies, the field) it is about, so that a log
//! line or a condition message is enough to act on. [`Error::metric_label`] gives a short, bounded
//! label for the reconcile-failure counter.

/// What went wrong while reconciling.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, naming the object: `create Job ns/name`.
        action: String,
        #[source]
        source: kube::Error,
    },

    /// An object holds a value groundskeeper cannot use.
    #[error("{object}: field {field}: {message}")]
    InvalidObject {
        /// `Kind namespace/name`.
        object: String,
        /// Path of the field, e.g. `metadata.annotations[groundskeeper.dev/cleanup-max-concurrent]`.
        field: String,
        message: String,
    },

    /// A finished Job's pod wrote a result that is not a groundskeeper result.
    #[error("Job {namespace}/{job}: pod {pod}: unreadable result in its termination message: {message}")]
    MalformedResult { namespace: String, job: String, pod: String, message: String },

    /// A status write kept conflicting with other writers.
    #[error("{object}: status.conditions: still conflicting after {attempts} attempts")]
    Conflict { object: String, attempts: u32 },

    /// A data store (Scylla agent, etcd) the controller itself talks to failed.
    #[error("{target}: {message}")]
    Upstream {
        /// What was called: `etcd member https://10.0.0.1:2379`, `agent of node sc-dc-rack-0`.
        target: String,
        message: String,
    },

    /// The controller's own configuration is unusable.
    #[error("configuration: {0}")]
    Config(String),

    /// A value could not be (de)serialised.
    #[error("{what}: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Short label for the reconcile-failure counter; one value per variant, so that the number of
    /// series stays bounded.
    pub fn metric_label(&self) -> String {
        match self {
            Error::Kube { .. } => "kube",
            Error::InvalidObject { .. } => "invalid_object",
            Error::MalformedResult { .. } => "malformed_result",
            Error::Conflict { .. } => "conflict",
            Error::Upstream { .. } => "upstream",
            Error::Config(_) => "config",
            Error::Json { .. } => "json",
        }
        .to_owned()
    }

    /// For `map_err`: a Kubernetes API error, saying what was being done.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }

    /// For `map_err`: a JSON error, saying what was being read or written.
    pub fn json(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> Error {
        let what = what.into();
        move |source| Error::Json { what, source }
    }

    /// The HTTP status code the API server answered with, if this is an API error response.
    pub fn api_status_code(&self) -> Option<u16> {
        match self {
            Error::Kube { source: kube::Error::Api(status), .. } => Some(status.code),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("denied", "Forbidden").with_code(code)))
    }

    #[test]
    fn labels_are_bounded_and_messages_name_the_object() {
        let json_error = serde_json::from_str::<u8>("x").unwrap_err();
        let cases = [
            (Error::kube("create Job ns/j")(api_error(403)), "kube", "create Job ns/j: "),
            (
                Error::InvalidObject {
                    object: "ScyllaCluster ns/sc".into(),
                    field: "metadata.annotations[groundskeeper.dev/cleanup-max-concurrent]".into(),
                    message: "\"two\" is not a number".into(),
                },
                "invalid_object",
                "ScyllaCluster ns/sc: field metadata.annotations[groundskeeper.dev/cleanup-max-concurrent]: ",
            ),
            (
                Error::MalformedResult {
                    namespace: "ns".into(),
                    job: "j".into(),
                    pod: "j-x".into(),
                    message: "eof".into(),
                },
                "malformed_result",
                "Job ns/j: pod j-x: ",
            ),
            (
                Error::Conflict { object: "ScyllaDBDatacenter ns/sc".into(), attempts: 5 },
                "conflict",
                "ScyllaDBDatacenter ns/sc: status.conditions: still conflicting after 5 attempts",
            ),
            (
                Error::Upstream { target: "etcd member m1".into(), message: "timeout".into() },
                "upstream",
                "etcd member m1: timeout",
            ),
            (Error::Config("--job-image: empty".into()), "config", "configuration: --job-image"),
            (Error::json("result of Job ns/j")(json_error), "json", "result of Job ns/j: "),
        ];
        for (error, label, prefix) in cases {
            assert_eq!(error.metric_label(), label);
            assert!(error.to_string().starts_with(prefix), "{error}");
        }
    }

    #[test]
    fn api_status_code_only_for_api_errors() {
        assert_eq!(Error::kube("get")(api_error(409)).api_status_code(), Some(409));
        assert_eq!(Error::Config("x".into()).api_status_code(), None);
    }
}
