//! An in-memory Kubernetes API, faithful enough for kube's watcher.
