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

/// The Rust examples of README.md and of every page under docs/ compile as doctests here, in the
/// package that depends on `backwave`, so no page can drift from the API (and the library's own
/// package includes nothing from outside its folder). `demo::readme::every_docs_page_is_run_and_compiled`
/// fails when a page is missing from this list; the pages' shell examples run in that file.
#[cfg(doctest)]
pub mod pages {
    #[doc = include_str!("../README.md")]
    pub struct Readme;
    #[doc = include_str!("../docs/operating.md")]
    pub struct Operating;
    #[doc = include_str!("../docs/alerting.md")]
    pub struct Alerting;
    #[doc = include_str!("../docs/embedding.md")]
    pub struct Embedding;
    #[doc = include_str!("../docs/postgres.md")]
    pub struct Postgres;
    #[doc = include_str!("../docs/contract.md")]
    pub struct Contract;
    #[doc = include_str!("../docs/reference.md")]
    pub struct Reference;
    #[doc = include_str!("../docs/benchmarks.md")]
    pub struct Benchmarks;
    #[doc = include_str!("../docs/architecture.md")]
    pub struct Architecture;
}
