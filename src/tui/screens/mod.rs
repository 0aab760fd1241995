//! The dashboard's screens, one module each: what a screen reads from the store, its rows, what
//! Enter opens, which row the actions and the kept selection name, and how it draws. This file
//! is the one place that says which screen a [`View`] shows ([`View::screen`]).
//!
//! A new view is a file here that declares its `VIEW` (an [`Info`]: titles, the state it
//! lists, its [`Screen`]), and its row in the key table's list of views (`keymap::views!`),
//! which gives it its digit and its place in the tabs: the [`View`] enum, [`View::ALL`] and the
//! module declarations are made here from that list. The app, the refresh and the frame reach
//! a view only through the trait.

// The job lists and the grouped screens, shared by the views of one state's jobs.
mod groups;
mod jobs;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::app::App;
use super::data::{Query, Snapshot, Target};
use super::filter::Filter;
use super::view::Theme;
use backwave::{JobId, JobState, Store};

/// The views' modules, the [`View`] enum in tab order and each view's [`Info`], from the key
/// table's list of views (`keymap::views!`).
macro_rules! declare_views {
    ($($digit:literal $name:ident $file:ident,)*) => {
        $(mod $file;)*

        /// The views, in tab order (the key table's list; each declared by its file's `VIEW`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum View {
            $($name,)*
        }

        impl View {
            pub const ALL: [View; [$(View::$name),*].len()] = [$(View::$name),*];

            /// What the view's file declares of it.
            pub fn info(self) -> &'static Info {
                match self {
                    $(View::$name => &$file::VIEW,)*
                }
            }
        }
    };
}

super::keymap::views!(declare_views);

/// What a view is: its tab titles, the state its job list shows, and its screens. Each view's
/// file declares its own as `VIEW`.
pub struct Info {
    pub title: &'static str,
    /// The tab's title when all tabs must fit 80 columns.
    pub short: &'static str,
    /// The state a job list of this view shows.
    pub state: Option<JobState>,
    screen: &'static dyn Screen,
    /// The screen `g` toggles to, in a view that groups.
    grouped: Option<&'static dyn Screen>,
}

impl Info {
    /// A view that shows `screen` and nothing else.
    const fn of(title: &'static str, short: &'static str, screen: &'static dyn Screen) -> Info {
        Info { title, short, state: None, screen, grouped: None }
    }

    /// A view of one state's jobs (the job list screen), `g` toggling to `grouped` if given.
    const fn jobs(
        title: &'static str,
        short: &'static str,
        state: JobState,
        grouped: Option<&'static dyn Screen>,
    ) -> Info {
        Info { title, short, state: Some(state), screen: &jobs::Jobs, grouped }
    }
}

impl View {
    pub fn index(self) -> usize {
        View::ALL.iter().position(|v| *v == self).unwrap_or(0)
    }

    pub fn title(self) -> &'static str {
        self.info().title
    }

    /// The state a job list of this view shows.
    pub fn state(self) -> Option<JobState> {
        self.info().state
    }

    /// Whether `g` groups this view's rows.
    pub fn groups(self) -> bool {
        self.info().grouped.is_some()
    }

    /// Whether the view opens grouped: Quarantined, whose jobs come in batches of one cause, so
    /// the groups say more than the rows. A view the operator leaves returns to this.
    pub fn grouped_by_default(self) -> bool {
        self == View::Quarantined
    }

    /// The screen this view shows, grouped or not.
    pub(crate) fn screen(self, grouped: bool) -> &'static dyn Screen {
        let info = self.info();
        match info.grouped {
            Some(g) if grouped => g,
            _ => info.screen,
        }
    }
}

/// What a row of a screen stands for: what the actions act on, and what a refresh keeps
/// selected when rows arrive above it.
#[derive(Clone, Debug, PartialEq)]
pub enum Row {
    Job(JobId),
    /// A log entry (by its sequence number) of a job.
    Entry {
        seq: i64,
        job: JobId,
    },
    /// A cause or quarantine group, as the store's actions name it.
    Group(Target),
    Queue(String),
    Schedule(String),
    Worker(String),
    Workflow(backwave::WorkflowId),
}

/// What Enter on a row does.
#[derive(Clone, Debug, PartialEq)]
pub enum Open {
    /// Open a job in the detail pane.
    Detail(JobId),
    /// Show `view`'s job list under `filter` (shown as `text`); `back_to` is where q returns.
    List { view: View, filter: Filter, text: String, back_to: Option<View> },
}

/// One screen of the dashboard. The app keeps the selection, the filter and the mode; a screen
/// says what its rows are and draws them.
pub(crate) trait Screen: Sync {
    /// Read what this screen lists into `s`. The header (counts, pauses, limits…), the log and
    /// the chart are read for every screen by `data::refresh`.
    fn read(&self, store: &Store, q: &Query, s: &mut Snapshot) -> backwave::Result<()>;

    /// Add to the refresh's query what only this screen asks for.
    fn ask(&self, _app: &App, _q: &mut Query) {}

    /// Keep in `next` what this refresh did not read again (see `Query::read_groups`).
    fn carry(&self, _prev: &Snapshot, _next: &mut Snapshot) {}

    /// Rows in the list.
    fn len(&self, app: &App) -> u64;

    /// The row at `index` of the list, when the app holds it.
    fn row(&self, app: &App, index: u64) -> Option<Row>;

    /// Where `row` is in the list now.
    fn find(&self, app: &App, row: &Row) -> Option<u64>;

    /// The row a refresh keeps selected, once the operator has moved off the top row
    /// (`same_list`: the refresh answers the list on show, same filter). `None`: the selection
    /// stays on its index.
    fn pin(&self, _app: &App, _same_list: bool) -> Option<Row> {
        None
    }

    /// Enter on the row at `index`.
    fn open(&self, app: &App, index: u64) -> Option<Open>;

    /// Why `/` does nothing here, if it does nothing.
    fn unfiltered(&self) -> Option<&'static str> {
        None
    }

    /// Refuse a filter this screen cannot apply (one line, why).
    fn check_filter(&self, _filter: &Filter) -> Result<(), String> {
        Ok(())
    }

    /// Draw the list into `area`.
    fn render(&self, app: &App, t: &Theme, area: Rect, buf: &mut Buffer);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new view's entry: distinct titles (the tabs and the help name it), a short title of
    /// six cells at most as the others (the tab row falls back to them at 80 columns), and `g`
    /// only where a grouped screen exists.
    #[test]
    fn every_view_has_distinct_titles_a_short_tab_and_groups_only_with_a_grouped_screen() {
        let mut titles: Vec<&str> = View::ALL.iter().map(|v| v.title()).collect();
        titles.sort();
        titles.dedup();
        assert_eq!(titles.len(), View::ALL.len());
        for (i, v) in View::ALL.iter().enumerate() {
            assert_eq!(v.index(), i);
            assert!(v.info().short.chars().count() <= 6, "{v:?}: short title '{}'", v.info().short);
            let grouped = v.screen(true) as *const dyn Screen as *const ();
            let list = v.screen(false) as *const dyn Screen as *const ();
            assert_eq!(v.groups(), grouped != list, "{v:?}");
        }
        assert_eq!(View::ALL.iter().filter(|v| v.groups()).count(), 2, "Dead-Lettered and Quarantined group");
    }
}
