//! The `bw top` dashboard, in the `backwave-cli` package (the library has no terminal crate):
//! app state, actions, keymap, update, screens, view, terminal.
//! State changes only in `App::update`; drawing (`view`) only reads; all database work goes
//! through `data::serve`, on a background thread, with the same library calls as the CLI.

pub mod actions;
pub mod app;
pub mod data;
pub mod feed;
pub mod filter;
pub mod keymap;
pub mod prompt;
pub mod screens;
pub mod terminal;
pub mod view;

pub use app::{Action, App, Config, Mode};
pub use data::{serve, Query, Request, Response, Snapshot, View};
