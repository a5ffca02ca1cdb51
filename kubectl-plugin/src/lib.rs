//! `kubectl groundskeeper`: groundskeeper's maintenance from the terminal. Create a task and
//! follow it to its end, list the queue, describe or cancel a task; one screen per etcd cluster
//! and per Scylla cluster's cleanup.
//!
//! Rendering is pure (`render`: objects and an explicit `now` to text); `access` holds the thin
//! Kubernetes calls and turns their failures into errors that say what to do; `commands` ties
//! the two together.

pub mod access;
pub mod cli;
pub mod commands;
pub mod config;
pub mod error;
pub mod render;
pub mod wait;
