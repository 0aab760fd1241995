//! Proving BackWave's promises under faults: the store against a model of SPEC.md, broken and
//! hostile input, killed processes, racing operators and a locked store. Each module names the
//! promise it keeps; docs/contract.md's "Guarantees" points here. The state machine, the
//! operator races and the crash soak run on both backends (`name::sqlite`, `name::postgres`).

use crate::backend;

#[path = "faults/state_machine.rs"]
mod state_machine;

#[path = "faults/support.rs"]
mod support;

#[path = "faults/broken_files.rs"]
mod broken_files;

#[path = "faults/hostile_input.rs"]
mod hostile_input;

#[path = "faults/soak.rs"]
mod soak;

#[path = "faults/races.rs"]
mod races;

#[path = "faults/incident.rs"]
mod incident;

#[path = "faults/cli_files.rs"]
mod cli_files;

#[path = "faults/postgres.rs"]
mod postgres_only;
#[path = "faults/terminal.rs"]
mod terminal;

#[path = "faults/own_server.rs"]
mod own_server;

#[path = "faults/disk_full.rs"]
mod disk_full;
