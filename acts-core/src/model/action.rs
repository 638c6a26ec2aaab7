//! The actions a client (or an `acts.core.action` act) may take on a
//! task, and their names: the one list the model's checks, the package
//! schemas, the scheduler and every transport read.

/// A client action on an act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Complete the act (wire name `next`), folding the options into it.
    Complete,
    /// Submit the act.
    Submit,
    /// Skip the act and its waiting siblings.
    Skip,
    /// Abort the act and every ancestor up to the process.
    Abort,
    /// Fail the act with `ecode` (and `message`) from the options.
    Error,
    /// Remove the act.
    Remove,
    /// Write the options into the process's root data.
    SetProcessVars,
    /// Go back to an earlier step (option `to`: its node id), which runs
    /// again.
    Back,
    /// Withdraw: the act's step (already done) runs again and the steps
    /// that followed it are undone.
    Cancel,
}

impl Action {
    /// Every action, in the order they are listed to users.
    pub const ALL: [Action; 9] = [
        Action::Complete,
        Action::Submit,
        Action::Back,
        Action::Cancel,
        Action::Abort,
        Action::Skip,
        Action::Error,
        Action::Remove,
        Action::SetProcessVars,
    ];

    /// The wire name (what YAML `acts.core.action` and clients send).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Complete => "next",
            Action::Submit => "submit",
            Action::Skip => "skip",
            Action::Abort => "abort",
            Action::Error => "error",
            Action::Remove => "remove",
            Action::SetProcessVars => "set_process_vars",
            Action::Back => "back",
            Action::Cancel => "cancel",
        }
    }
}

/// Every action name with the action it names: the wire names, and the
/// aliases `complete` (of `next`) and `set_vars` (of `set_process_vars`).
/// The one list that [`ACTION_NAMES`], `FromStr` and [`UnknownAction`]'s
/// message come from.
const NAMED: [(&str, Action); 11] = [
    ("next", Action::Complete),
    ("complete", Action::Complete),
    ("submit", Action::Submit),
    ("back", Action::Back),
    ("cancel", Action::Cancel),
    ("abort", Action::Abort),
    ("skip", Action::Skip),
    ("error", Action::Error),
    ("remove", Action::Remove),
    ("set_process_vars", Action::SetProcessVars),
    ("set_vars", Action::SetProcessVars),
];

const fn names() -> [&'static str; NAMED.len()] {
    let mut out = [""; NAMED.len()];
    let mut i = 0;
    while i < NAMED.len() {
        out[i] = NAMED[i].0;
        i += 1;
    }
    out
}

/// Every action name [`Action`]'s `FromStr` accepts, aliases included:
/// what YAML `acts.core.action`, the executor and the CLI understand.
pub const ACTION_NAMES: &[&str] = &names();

/// An action name that is not one of [`ACTION_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown action '{0}' (use one of: {names})", names = ACTION_NAMES.join(", "))]
pub struct UnknownAction(pub String);

impl std::str::FromStr for Action {
    type Err = UnknownAction;

    /// The action named `name` (see [`ACTION_NAMES`]).
    fn from_str(name: &str) -> Result<Self, UnknownAction> {
        NAMED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| *a)
            .ok_or_else(|| UnknownAction(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_from_its_wire_name_and_aliases_name_the_same() {
        for a in Action::ALL {
            assert_eq!(a.as_str().parse::<Action>(), Ok(a));
        }
        assert_eq!("complete".parse::<Action>(), Ok(Action::Complete));
        assert_eq!("set_vars".parse::<Action>(), Ok(Action::SetProcessVars));
        assert_eq!(ACTION_NAMES.len(), 11);
        let err = "push".parse::<Action>().unwrap_err().to_string();
        for name in ACTION_NAMES {
            assert!(err.contains(name), "{err}");
        }
    }
}
