//! `task create --wait`: watches the task (one watch on the one object, no polling) and shows
//! its progress until it ends, is deleted, or the user stops waiting.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use groundskeeper_api::maintenance_task::MaintenanceTask;

use crate::access::Access;
use crate::error::{Error, Request};
use crate::render::progress::{self, EXIT_DELETED, EXIT_INTERRUPTED, Seen};

/// Where progress goes: a terminal gets a block redrawn in place, anything else plain lines for
/// what changed.
struct Display {
    out: Box<dyn Write>,
    terminal: bool,
    /// Lines of the block last drawn (terminal only).
    drawn: usize,
    seen: Option<Seen>,
}

impl Display {
    fn new(to_stderr: bool) -> Display {
        let (out, terminal): (Box<dyn Write>, bool) = if to_stderr {
            (Box::new(std::io::stderr()), std::io::stderr().is_terminal())
        } else {
            (Box::new(std::io::stdout()), std::io::stdout().is_terminal())
        };
        Display { out, terminal, drawn: 0, seen: None }
    }

    fn show(&mut self, task: &MaintenanceTask, now: Timestamp) {
        if self.terminal {
            let block = progress::block(task, now);
            if self.drawn > 0 {
                // Back to the top of the last block, and clear it.
                let _ = write!(self.out, "\x1b[{}A\x1b[J", self.drawn);
            }
            let _ = write!(self.out, "{block}");
            self.drawn = block.lines().count();
        } else {
            for line in progress::changes(self.seen.as_ref(), task, now) {
                let _ = writeln!(self.out, "{line}");
            }
            self.seen = Some(Seen::of(task));
        }
        let _ = self.out.flush();
    }

    fn say(&mut self, text: &str) {
        self.drawn = 0;
        let _ = write!(self.out, "{text}");
        let _ = self.out.flush();
    }
}

/// Follows task `namespace/name` to its end: the exit code, and the task as last seen.
pub async fn follow(
    access: &Access,
    namespace: &str,
    name: &str,
    progress_to_stderr: bool,
) -> Result<(i32, Option<MaintenanceTask>), Error> {
    let api = access.api::<MaintenanceTask>(Some(namespace));
    // One object by name; after an error the watcher starts again with kube's default backoff,
    // so an API server that is away is not asked in a tight loop.
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut changes = watcher::watcher(api, config).default_backoff().boxed();
    // Whether the last (re)list found the task: a list without it means it is gone.
    let mut listed = false;
    let mut display = Display::new(progress_to_stderr);
    let mut last: Option<MaintenanceTask> = None;
    // Only a terminal's elapsed time needs redrawing between changes.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            _ = &mut interrupted => {
                display.say(&format!("\n{}", progress::interrupted(namespace, name)));
                return Ok((EXIT_INTERRUPTED, last));
            }
            _ = tick.tick(), if display.terminal => {
                if let Some(task) = &last {
                    display.show(task, Timestamp::now());
                }
            }
            change = changes.next() => {
                let seen = match change {
                    Some(Ok(Event::Apply(task))) => Some(task),
                    Some(Ok(Event::InitApply(task))) => {
                        listed = true;
                        Some(task)
                    }
                    Some(Ok(Event::Init)) => {
                        listed = false;
                        None
                    }
                    Some(Ok(Event::InitDone)) if listed => None,
                    Some(Ok(Event::Delete(_))) | Some(Ok(Event::InitDone)) => {
                        display.say(&format!("task {name} was deleted before it ended (cancelled, or its namespace went away)\n"));
                        return Ok((EXIT_DELETED, last));
                    }
                    Some(Err(watcher::Error::WatchFailed(kube::Error::Api(status))))
                    | Some(Err(watcher::Error::WatchStartFailed(kube::Error::Api(status))))
                    | Some(Err(watcher::Error::InitialListFailed(kube::Error::Api(status))))
                        if matches!(status.code, 401 | 403 | 404) =>
                    {
                        let request = Request::of::<MaintenanceTask>("watch", Some(namespace), Some(name));
                        return Err(crate::error::explain(&request, &status, Some(true)));
                    }
                    Some(Err(err)) => {
                        display.say(&format!("watch of task {name} interrupted ({err}); resuming\n"));
                        None
                    }
                    None => {
                        return Err(Error::Api {
                            action: format!("watch MaintenanceTask {name} in namespace {namespace}"),
                            message: "the watch ended".into(),
                        });
                    }
                };
                if let Some(task) = seen {
                    display.show(&task, Timestamp::now());
                    if let Some((code, line)) = progress::outcome(&task) {
                        display.say(&format!("{line}\n"));
                        return Ok((code, Some(task)));
                    }
                    last = Some(task);
                }
            }
        }
    }
}
