//! Integration tests: the real `ocflow` binary with the real embedded Python, on temporary
//! repositories and workspaces.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
