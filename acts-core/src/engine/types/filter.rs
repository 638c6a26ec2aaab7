//! Channel filters: [`ChannelOptions`], glob patterns on a message's type,
//! state, key, package and model, and their compiled matcher. Shared by
//! channels, the emitter and the stored registrations of durable channels.

use wildmatch::WildMatch;

use crate::scheduler::{Message, MessageInterest, MessageState, MessageType};

/// Glob filters of a channel (`*` any run of characters, `?` one
/// character). A message passes when every filter matches; a message
/// without a key or package is matched as the empty string.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ChannelOptions {
    /// Message type: `workflow`, `step`, `branch`, `act`.
    pub r#type: String,
    /// Message state: `created`, `completed`, `error`, ...
    pub state: String,
    /// The act's `params.key`.
    pub key: String,
    /// The package id.
    pub uses: String,
    /// The model id.
    pub model: String,
    /// Per-key globs over the node's `options` as messages carry them
    /// (`inputs.options.<key>`, e.g. a `tag`; absent is the empty string,
    /// a value that is not text is matched as its JSON).
    pub options: std::collections::BTreeMap<String, String>,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            r#type: "*".into(),
            state: "*".into(),
            key: "*".into(),
            uses: "*".into(),
            model: "*".into(),
            options: Default::default(),
        }
    }
}

impl ChannelOptions {
    /// Only messages of `type`.
    pub fn with_type(mut self, pattern: impl Into<String>) -> Self {
        self.r#type = pattern.into();
        self
    }

    /// Only messages in `state`.
    pub fn with_state(mut self, pattern: impl Into<String>) -> Self {
        self.state = pattern.into();
        self
    }

    /// Only acts whose key matches.
    pub fn with_key(mut self, pattern: impl Into<String>) -> Self {
        self.key = pattern.into();
        self
    }

    /// Only acts of packages that match.
    pub fn with_uses(mut self, pattern: impl Into<String>) -> Self {
        self.uses = pattern.into();
        self
    }

    /// Only processes of models that match.
    pub fn with_model(mut self, pattern: impl Into<String>) -> Self {
        self.model = pattern.into();
        self
    }

    /// Only messages whose node option `key` matches (`with_option("tag",
    /// "finance*")`).
    pub fn with_option(mut self, key: impl Into<String>, pattern: impl Into<String>) -> Self {
        self.options.insert(key.into(), pattern.into());
        self
    }
}

pub(crate) struct Filters {
    r#type: WildMatch,
    state: WildMatch,
    key: WildMatch,
    uses: WildMatch,
    model: WildMatch,
    options: Vec<(String, WildMatch)>,
    /// The (type, state) pairs these filters may pass (the other filters
    /// look at what only a built message has), derived once.
    interest: MessageInterest,
}

impl Filters {
    pub(crate) fn new(o: &ChannelOptions) -> Self {
        let (r#type, state) = (WildMatch::new(&o.r#type), WildMatch::new(&o.state));
        let mut interest = MessageInterest::NONE;
        for t in MessageType::ALL {
            for s in MessageState::ALL {
                if r#type.matches(t.as_str()) && state.matches(s.as_str()) {
                    interest = interest.with(*t, *s);
                }
            }
        }
        Self {
            r#type,
            state,
            key: WildMatch::new(&o.key),
            uses: WildMatch::new(&o.uses),
            model: WildMatch::new(&o.model),
            options: o
                .options
                .iter()
                .map(|(k, p)| (k.clone(), WildMatch::new(p)))
                .collect(),
            interest,
        }
    }

    /// The (type, state) pairs these filters may pass.
    pub(crate) fn interest(&self) -> MessageInterest {
        self.interest
    }

    pub(crate) fn matches(&self, m: &Message) -> bool {
        self.r#type.matches(m.r#type.as_str())
            && self.state.matches(m.state.as_str())
            && self.key.matches(m.key.as_deref().unwrap_or(""))
            && self.uses.matches(m.uses.as_deref().unwrap_or(""))
            && self.model.matches(&m.model_id)
            && self.options.iter().all(|(k, p)| {
                match m.inputs.get("options").and_then(|o| o.get(k)) {
                    None => p.matches(""),
                    Some(serde_json::Value::String(s)) => p.matches(s),
                    Some(other) => p.matches(&other.to_string()),
                }
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A message of model `m1` with the given type, state and key.
    pub(crate) fn msg(t: &str, state: &str, key: Option<&str>) -> Message {
        Message {
            r#type: t.parse().expect("a test names a known type"),
            state: state.parse().expect("a test names a known state"),
            key: key.map(str::to_owned),
            model_id: "m1".into(),
            ..Message::default()
        }
    }

    #[test]
    fn filters_are_globs_on_every_field() {
        let f = Filters::new(&ChannelOptions::default().with_type("act").with_key("app*"));
        assert!(f.matches(&msg("act", "created", Some("approve"))));
        assert!(!f.matches(&msg("act", "created", Some("review"))));
        assert!(!f.matches(&msg("step", "created", Some("approve"))));
        assert!(!f.matches(&msg("act", "created", None)), "no key is ''");
        let any = Filters::new(&ChannelOptions::default());
        assert!(any.matches(&msg("workflow", "completed", None)));
        let other_model = Filters::new(&ChannelOptions::default().with_model("m?x"));
        assert!(!other_model.matches(&msg("act", "created", None)));
    }
}
