//! The `bw top` dashboard (feature "cli"): app state, actions, keymap, update, view, terminal.
