//! The library's errors as `bw` and `bw top` say them to an operator. The library speaks of its
//! API (`Store::grant`, `Store::set_setting`); an operator acts through `bw`, so each hint that
//! names a call is said here as the command that makes it, and every other word is the
//! library's.

use backwave::Error;

/// The library's hints that name a call, each with the command an operator runs instead. The
/// library's wording is matched whole, so a hint it rewords falls back to its own text (a test
/// below holds the two together).
const HINTS: [(&str, &str); 14] = [
    (
        "or an admin raises the store's `payload_limit` setting (`Store::set_setting`)",
        "or an admin raises the limit (`bw config set payload_limit SIZE`)",
    ),
    (
        "make it smaller or raise the store's `payload_limit` setting (`Store::set_setting`)",
        "make it smaller or raise the limit (bw config set payload_limit)",
    ),
    ("(create a store with `Store::create`)", "(create a store with `bw init`)"),
    ("the schema's owner (`Store::open` with the owner's URL)", "the schema's owner (e.g. `bw init --db URL`)"),
    (
        "only a store marked as a demo store (`Store::mark_demo`) is ever emptied",
        "only a store `bw demo` made is ever emptied",
    ),
    ("(as `Store::audit_entries` shows them)", "(as `bw audit` shows them)"),
    ("(`Store::schedules` lists them)", "(`bw schedules` lists them)"),
    ("(see `Store::workers`)", "(see `bw workers`)"),
    (": turn the feature on, or give `Store::open` a file path", "; give --db or BW_DB a file path"),
    (": upgrade the backwave library", ": upgrade bw"),
    ("pause it instead (`Store::pause`)", "pause it instead (bw pause)"),
    ("or set `force` to ", "or pass --force to "),
    (
        "open it once with `Store::open` where it may be written, which migrates it",
        "open it writable once with this bw to migrate it",
    ),
    (": `Store::create_loaded` makes only a new store", ": generate refuses to touch it"),
];

/// `e` as an operator reads it: the library's message with the `bw` command in place of each
/// call it names.
pub fn error_text(e: &Error) -> String {
    match e {
        Error::StoreMissing { path } => {
            format!("no BackWave store at '{0}': create one with `bw init --db {0}`", path.display())
        }
        Error::PermissionDenied { actor, permission } => {
            format!("{actor} lacks the '{permission}' permission (an admin can run `bw grant {actor} {permission}`)")
        }
        Error::FailureDetailOff => {
            "failure detail is switched off for this store: none is shown while it is off, \
                                   not even detail captured before (an admin can run `bw config set failure_detail on`)"
                .to_string()
        }
        _ => {
            let mut text = e.to_string();
            for (api, command) in HINTS {
                if let Some(at) = text.find(api) {
                    text.replace_range(at..at + api.len(), command);
                }
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use backwave::store::WorkerSelector;
    use backwave::{Permission, Store};

    use super::*;

    #[test]
    fn the_typed_refusals_name_the_command_that_mends_them() {
        let missing = Error::StoreMissing { path: PathBuf::from("jobs.db") };
        assert_eq!(error_text(&missing), "no BackWave store at 'jobs.db': create one with `bw init --db jobs.db`");
        let denied = Error::PermissionDenied { actor: "ali".into(), permission: Permission::Operate };
        assert_eq!(error_text(&denied), "ali lacks the 'operate' permission (an admin can run `bw grant ali operate`)");
        assert!(error_text(&Error::FailureDetailOff).ends_with("(an admin can run `bw config set failure_detail on`)"));
        let large = Error::PayloadTooLarge { bytes: 2048, limit: 1024, job: None };
        assert_eq!(
            error_text(&large),
            "the payload is 2.0 KiB (2048 bytes), over the store's payload_limit of 1.0 KiB (1024 bytes): store the \
             data elsewhere and enqueue a reference to it, or an admin raises the limit (`bw config set payload_limit \
             SIZE`)"
        );
    }

    /// The library's own words for its hints, read from a store that refuses: were one reworded
    /// there, `bw` would print the library's text instead of the command, and this says so.
    #[test]
    fn every_hint_the_library_words_is_said_as_a_command() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("jobs.db")).unwrap();
        let me = backwave::store::current_actor();
        store.bootstrap_admin(&me).unwrap();
        let said = [
            store.schedule("nope").unwrap_err(),
            store.reset_demo().unwrap_err(),
            store.quiet_workers(&me, &WorkerSelector::Id("nobody".into())).unwrap_err(),
            store.grant(&me, "ali ce", Permission::Operate).unwrap_err(),
        ];
        for e in &said {
            let text = error_text(e);
            assert!(text.contains("`bw ") && !text.contains("`Store::"), "{text}");
        }
        let library = [
            Error::StoreMissing { path: PathBuf::from("x") }.to_string(),
            Error::PermissionDenied { actor: "a".into(), permission: Permission::Admin }.to_string(),
            Error::FailureDetailOff.to_string(),
            Error::PayloadTooLarge { bytes: 2, limit: 1, job: None }.to_string(),
        ];
        for text in library {
            assert!(!text.contains("bw "), "the library names a bw command: {text}");
        }
    }

    /// Hints the library words as an argument or a call, which an operator reaches through a
    /// flag or a command of its own: said in `bw`'s words, and the library's own text holds none.
    #[test]
    fn the_hints_an_operator_meets_as_flags_are_said_as_flags() {
        use backwave::store::{LimitSpec, PauseKind};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("jobs.db")).unwrap();
        let me = backwave::store::current_actor();
        store.bootstrap_admin(&me).unwrap();
        let said = [
            (
                store.pause(&me, PauseKind::Queue, "nowhere", None, false).unwrap_err(),
                "(check the spelling, or pass --force to pause it ahead of its first job)",
            ),
            (
                store
                    .set_limit(
                        &me,
                        PauseKind::Queue,
                        "nowhere",
                        &LimitSpec { concurrency: Some(0), rate: None },
                        None,
                        true,
                    )
                    .unwrap_err(),
                "would stop every claim: pause it instead (bw pause)",
            ),
            (
                Store::create_loaded(dir.path().join("jobs.db"), 1, |_| Ok(())).map(|_| ()).unwrap_err(),
                "already exists: generate refuses to touch it",
            ),
            (Error::SchemaTooNew { path: PathBuf::from("x"), found: 99, supported: 21 }, "up to 21: upgrade bw"),
            (
                Error::PostgresNotBuilt { target: "postgres://h/db".into() },
                "`postgres`); give --db or BW_DB a file path",
            ),
        ];
        for (e, operator) in &said {
            let library = e.to_string();
            assert!(!library.contains("bw") && !library.contains("--"), "the library speaks of bw: {library}");
            assert!(error_text(e).ends_with(operator), "{} does not end with {operator:?}", error_text(e));
        }
    }
}
