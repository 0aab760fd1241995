//! `bw`: the operator tool and live dashboard of BackWave, over the `backwave` library.
//!
//! Every action here calls the same library function the dashboard calls; this crate adds the
//! terminal (clap, ratatui, crossterm, comfy-table), the demo and the text formats an operator
//! reads. An application embeds `backwave` and compiles none of it.

// Safe bindings (nix) cover the user name, access(2) and the host name: no unsafe code here.
#![forbid(unsafe_code)]

pub mod cli;
pub mod demo;
pub mod text;
pub mod tui;
