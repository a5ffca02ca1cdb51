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
    MalformedResult {
        namespace: String,
        job: String,
        pod: String,
        message: String,
    },

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
            Error::Kube {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }
}
