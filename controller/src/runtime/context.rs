//! What every reconciliation gets: the API client, the configuration, metrics and the Event
//! recorder.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::runtime::clock::Clock;
use crate::runtime::error::{Error, Result};
use crate::runtime::metrics::Metrics;
use groundskeeper_api::conditions::truncate;

/// Longest Event note the API server accepts (bytes).
pub(crate) const EVENT_NOTE_MAX: usize = 1024;

/// Name the controller reports itself as, in Events and field managers.
pub(crate) const CONTROLLER_NAME: &str = "groundskeeper";

/// Limits put on every maintenance Job unless a controller says otherwise.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct JobLimits {
    /// Retries of a Job's pod before the Job fails (bad input fails it at once regardless).
    #[arg(long = "job-backoff-limit", env = "GROUNDSKEEPER_JOB_BACKOFF_LIMIT", default_value_t = 3)]
    pub backoff_limit: i32,
    /// Wall-clock bound of one Job, all retries included, in seconds.
    #[arg(
        long = "job-active-deadline-seconds",
        env = "GROUNDSKEEPER_JOB_ACTIVE_DEADLINE_SECONDS",
        default_value_t = 6 * 3600
    )]
    pub active_deadline_seconds: i64,
    /// How long a finished Job (and its result) is kept before Kubernetes deletes it, in seconds.
    #[arg(
        long = "job-ttl-seconds-after-finished",
        env = "GROUNDSKEEPER_JOB_TTL_SECONDS_AFTER_FINISHED",
        default_value_t = 24 * 3600
    )]
    pub ttl_seconds_after_finished: i32,
}

impl Default for JobLimits {
    fn default() -> Self {
        flag_defaults()
    }
}

/// The generic part of the controller's configuration: flags and environment, read once at
/// start-up. Each data store's flags are its own (`etcd::config::Config`,
/// `scylla::config::Config`), composed with these by the crate's root and reached through
/// [`Context::store_config`].
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct ControllerConfig {
    /// Image of `groundskeeper-job` run by maintenance Jobs.
    #[arg(
        long,
        env = "GROUNDSKEEPER_JOB_IMAGE",
        default_value = "ghcr.io/groundskeeper-dev/groundskeeper-job:latest"
    )]
    pub job_image: String,
    /// imagePullPolicy of maintenance Jobs: Always, IfNotPresent or Never.
    #[arg(long, env = "GROUNDSKEEPER_JOB_IMAGE_PULL_POLICY", default_value = "IfNotPresent")]
    pub job_image_pull_policy: String,
    #[command(flatten)]
    pub job_limits: JobLimits,
    /// Requeue after a reconciliation that found nothing to do.
    #[arg(long, env = "GROUNDSKEEPER_REQUEUE_IDLE", value_parser = parse_seconds, default_value = "300")]
    pub requeue_idle: Duration,
    /// Requeue while maintenance is under way (Jobs running).
    #[arg(long, env = "GROUNDSKEEPER_REQUEUE_BUSY", value_parser = parse_seconds, default_value = "15")]
    pub requeue_busy: Duration,
    /// Requeue after a failed reconciliation.
    #[arg(long, env = "GROUNDSKEEPER_REQUEUE_ERROR", value_parser = parse_seconds, default_value = "30")]
    pub requeue_error: Duration,
    /// Attempts at a status write that conflicts with other writers before giving up.
    #[arg(long, env = "GROUNDSKEEPER_STATUS_WRITE_ATTEMPTS", default_value_t = 5)]
    pub status_write_attempts: u32,
    /// The namespaces to look after, comma-separated (namespaced mode: a Role in each, see
    /// `manifests/install/namespaced/`). None: every namespace (the ClusterRole of
    /// `manifests/install/cluster-wide/`).
    #[arg(long, env = "GROUNDSKEEPER_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        flag_defaults()
    }
}

impl ControllerConfig {
    /// Checks what clap cannot: values Kubernetes would reject later, with less clear errors.
    pub fn validate(&self) -> Result<()> {
        if self.job_image.trim().is_empty() {
            return Err(Error::Config("--job-image: must not be empty".into()));
        }
        if !["Always", "IfNotPresent", "Never"].contains(&self.job_image_pull_policy.as_str()) {
            return Err(Error::Config(format!(
                "--job-image-pull-policy: {:?} is not one of Always, IfNotPresent, Never",
                self.job_image_pull_policy
            )));
        }
        let limits = &self.job_limits;
        if limits.backoff_limit < 0
            || limits.active_deadline_seconds <= 0
            || limits.ttl_seconds_after_finished < 0
        {
            return Err(Error::Config(format!(
                "Job limits: backoffLimit and ttlSecondsAfterFinished must be ≥ 0 and \
                 activeDeadlineSeconds > 0, got {limits:?}"
            )));
        }
        if let Some(bad) = self
            .namespaces
            .iter()
            .find(|n| !n.trim().is_empty() && !crate::runtime::deploy::is_namespace_name(n.trim()))
        {
            return Err(Error::Config(format!(
                "--namespaces (GROUNDSKEEPER_NAMESPACES): {bad:?} is not a namespace name \
                 (lowercase letters, digits and '-', at most 63); give namespaces separated by commas"
            )));
        }
        if self.status_write_attempts == 0 {
            return Err(Error::Config("--status-write-attempts: must be at least 1".into()));
        }
        Ok(())
    }
}

/// The configuration `T` (a set of flags) as its flags' defaults: what an empty command line
/// gives, the environment not read. A flag's default is written once, in its `#[arg]`, and each
/// configuration's `Default` is this.
pub fn flag_defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let command = T::augment_args(clap::Command::new("defaults").no_binary_name(true))
        .mut_args(|arg| arg.env(None::<&'static str>));
    let matches = command.try_get_matches_from(std::iter::empty::<&str>()).expect("every flag has a default");
    T::from_arg_matches(&matches).expect("the defaults make a configuration")
}

/// A flag's value in whole seconds.
pub fn parse_seconds(value: &str) -> std::result::Result<Duration, String> {
    value
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|err| format!("{value:?} is not a whole number of seconds: {err}"))
}

/// Each data store's configuration, by its type: set by the crate's root when the controller
/// starts, read by the store's code through [`Context::store_config`].
#[derive(Clone, Default)]
struct StoreConfigs(BTreeMap<TypeId, Arc<dyn Any + Send + Sync>>);

/// Shared by every reconciliation of every controller.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub config: ControllerConfig,
    pub metrics: Arc<Metrics>,
    /// Publishes `events.k8s.io/v1` Events.
    pub recorder: Recorder,
    /// What time it is for decisions that time drives (the system's unless a test set one).
    pub clock: Clock,
    stores: StoreConfigs,
}

impl Context {
    /// A context whose Events are reported by [`CONTROLLER_NAME`], instance = this pod's hostname.
    pub fn new(client: kube::Client, config: ControllerConfig, metrics: Arc<Metrics>) -> Self {
        let recorder = Recorder::new(client.clone(), Reporter::from(CONTROLLER_NAME));
        Self { client, config, metrics, recorder, clock: Clock::system(), stores: StoreConfigs::default() }
    }

    /// The same context with a data store's configuration `T` (replacing one set before).
    pub fn with_store_config<T: Any + Send + Sync>(mut self, config: T) -> Self {
        self.stores.0.insert(TypeId::of::<T>(), Arc::new(config));
        self
    }

    /// A data store's configuration `T`: as set by [`Context::with_store_config`], or its
    /// defaults when none was (a context made for one test).
    pub fn store_config<T: Any + Default + Send + Sync>(&self) -> Arc<T> {
        match self.stores.0.get(&TypeId::of::<T>()) {
            Some(config) => {
                config.clone().downcast::<T>().expect("a configuration is stored under its own type")
            }
            None => Arc::new(T::default()),
        }
    }

    /// The same context on another clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Publishes an Event about `regarding` (e.g. `scylla_cluster.object_ref(&())`), its note
    /// cut to the API's limit. Events are for people, and the conditions and metrics carry the
    /// same facts: one that cannot be published is logged, never retried, and fails nothing.
    pub(crate) async fn publish_event(&self, regarding: &ObjectReference, mut event: Event) {
        event.note = event.note.map(|note| truncate(&note, EVENT_NOTE_MAX));
        if let Err(err) = self.recorder.publish(&event, regarding).await {
            let name = regarding.name.as_deref().unwrap_or("?");
            tracing::warn!(reason = %event.reason, about = name, error = %err, "could not publish an Event");
        }
    }

    /// Publishes the Events a controller decided on about `regarding`, each as the controller's
    /// `action` (`Maintain`, `Cleanup`, `Discover`): the one way a data store publishes Events.
    pub(crate) async fn publish_events(
        &self,
        regarding: &ObjectReference,
        action: &str,
        events: &[PlannedEvent],
    ) {
        for planned in events {
            let event = Event {
                type_: if planned.warning { EventType::Warning } else { EventType::Normal },
                reason: planned.reason.to_owned(),
                note: Some(planned.note.clone()),
                action: action.to_owned(),
                secondary: planned.related.clone(),
            };
            self.publish_event(regarding, event).await;
        }
    }
}

/// An Event as a controller decides it, published by [`Context::publish_events`].
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedEvent {
    pub warning: bool,
    /// CamelCase.
    pub reason: &'static str,
    pub note: String,
    /// What else the Event is about (a node, a Job), besides the object it regards.
    pub related: Option<ObjectReference>,
}

/// The node or Job an Event is about, besides the object it regards. Events with the same reason
/// about the same object are folded into one series unless they name different related objects,
/// so each node gets an Event of its own.
pub(crate) fn related(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use clap::Parser;
    use http::{Method, Request, Response};
    use kube::client::Body;
    use kube::runtime::events::EventType;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        config: ControllerConfig,
    }

    #[test]
    fn flag_defaults_are_the_default_config() {
        let cli = Cli::try_parse_from(["groundskeeper-controller"]).unwrap();
        assert_eq!(cli.config, ControllerConfig::default());
        cli.config.validate().unwrap();
    }

    #[test]
    fn namespaces_are_a_comma_separated_list_of_namespace_names() {
        let parse = |value: &str| {
            Cli::try_parse_from(["groundskeeper-controller", "--namespaces", value]).unwrap().config
        };
        let config = parse("scylla,etcd");
        assert_eq!(config.namespaces, ["scylla", "etcd"]);
        config.validate().unwrap();
        let watched = |value: &str| crate::runtime::scope::watched(&parse(value));
        assert_eq!(watched("scylla,etcd,scylla"), [Some("etcd".to_owned()), Some("scylla".to_owned())]);
        assert_eq!(watched(" ,"), [None], "blank entries name no namespace: every namespace");
        assert_eq!(crate::runtime::scope::watched(&ControllerConfig::default()), [None]);
        let err = parse("scylla,Not_A_Namespace").validate().unwrap_err().to_string();
        assert!(err.contains("\"Not_A_Namespace\" is not a namespace name"), "{err}");
    }

    #[test]
    fn invalid_configurations_name_the_flag() {
        type Breakage = fn(&mut ControllerConfig);
        let cases: [(&str, Breakage); 5] = [
            ("--job-image", |c| c.job_image = " ".into()),
            ("--job-image-pull-policy", |c| c.job_image_pull_policy = "always".into()),
            ("activeDeadlineSeconds", |c| c.job_limits.active_deadline_seconds = 0),
            ("backoffLimit", |c| c.job_limits.backoff_limit = -1),
            ("--status-write-attempts", |c| c.status_write_attempts = 0),
        ];
        for (wanted, break_it) in cases {
            let mut config = ControllerConfig::default();
            break_it(&mut config);
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(wanted), "{wanted}: {err}");
        }
    }

    #[tokio::test]
    async fn events_are_posted_to_events_k8s_io() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let mut handle = pin!(handle);
            let (request, send) = handle.next_request().await.unwrap();
            assert_eq!(request.method(), Method::POST);
            assert_eq!(request.uri().path(), "/apis/events.k8s.io/v1/namespaces/scylla/events");
            let body: serde_json::Value =
                serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap()).unwrap();
            send.send_response(Response::new(Body::from(serde_json::to_vec(&body).unwrap())));
            body
        });
        let context = Context::new(
            kube::Client::new(service, "default"),
            ControllerConfig::default(),
            Arc::new(Metrics::new()),
        );
        let regarding = ObjectReference {
            api_version: Some("scylla.scylladb.com/v1".into()),
            kind: Some("ScyllaCluster".into()),
            name: Some("sc".into()),
            namespace: Some("scylla".into()),
            uid: Some("u".into()),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Normal,
            reason: "CleanupSucceeded".into(),
            note: Some("node sc-dc-r1-0 cleaned".into()),
            action: "Cleanup".into(),
            secondary: None,
        };
        context.publish_event(&regarding, event).await;
        let body = server.await.unwrap();
        assert_eq!(body["reason"], "CleanupSucceeded");
        assert_eq!(body["type"], "Normal");
        assert_eq!(body["regarding"]["name"], "sc");
        assert_eq!(body["reportingController"], CONTROLLER_NAME);
    }
}
