//! The runner's own log lines, as `kubectl logs job/<name>` would show them: every tracing event
//! of groundskeeper-job, labelled with the Job whose pod emitted it (the pod's span), plus the
//! controller's warnings and errors.

use std::fmt::Debug;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, filter::Targets};

use crate::say;

/// The span a Job's pod runs in; its `job` field labels the pod's log lines.
pub const POD_SPAN: &str = "pod";

/// Fields that would only clutter a line meant for people (task ids, raw counters).
const HIDDEN_FIELDS: &[&str] = &["task", "completed", "total", "units", "state", "node"];

pub fn install() {
    // The demo's own target too: the pod spans are its, and a span filtered out carries no Job.
    let shown = Targets::new()
        .with_target("demo", Level::INFO)
        .with_target("groundskeeper_job", Level::INFO)
        .with_target("groundskeeper_controller", Level::WARN);
    tracing_subscriber::registry().with(PodLogs.with_filter(shown)).init();
}

/// One line of a pod's log (or of the controller's, `job` = `None`).
pub fn pod_line(job: Option<&str>, level: &Level, text: &str) {
    let level = if *level <= Level::WARN { format!("{level} ") } else { String::new() };
    match job {
        Some(job) => say::line(format!("  logs job/{job} │ {level}{text}")),
        None => say::line(format!("  logs groundskeeper │ {level}{text}")),
    }
}

struct PodLogs;

/// The Job a pod span belongs to, kept in the span's extensions.
struct PodOfJob(String);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for PodLogs {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != POD_SPAN {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let job = fields.take("job");
        if let (Some(job), Some(span)) = (job, ctx.span(id)) {
            span.extensions_mut().insert(PodOfJob(job));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let job = ctx.event_scope(event).and_then(|scope| {
            scope.from_root().find_map(|span| span.extensions().get::<PodOfJob>().map(|p| p.0.clone()))
        });
        let mut fields = Fields::default();
        event.record(&mut fields);
        pod_line(job.as_deref(), event.metadata().level(), &fields.render());
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<(&'static str, String)>,
}

impl Fields {
    fn take(&mut self, name: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(n, _)| *n == name)?;
        Some(self.pairs.remove(at).1)
    }

    fn render(&self) -> String {
        let shown = self.pairs.iter().filter(|(name, _)| !HIDDEN_FIELDS.contains(name));
        std::iter::once(self.message.clone())
            .chain(shown.map(|(name, value)| format!("{name}={value}")))
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.record(field, format!("{value:?}"));
    }
}

impl Fields {
    fn record(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.pairs.push((field.name(), value));
        }
    }
}
