//! The keys of durable subscriptions and the ids their messages are
//! acked by.
//!
//! May use: nothing but std.

/// The durable channel of principal `who`'s subscription `client`: the
/// principal is part of the key (escaped, so one principal's keys are
/// never a prefix of another's), so a client id names a subscription in
/// its caller's own namespace only.
pub(crate) fn channel_key(who: &str, client: &str) -> String {
    let escape = |s: &str| {
        s.replace('%', "%25")
            .replace('/', "%2F")
            .replace(':', "%3A")
    };
    format!("grpc:{}:{}", escape(who), escape(client))
}

/// The id a client acks delivery `msg_id` of durable `channel` by (a
/// message id has no `:`).
pub(crate) fn ack_id(channel: &str, msg_id: &str) -> String {
    format!("{msg_id}:{channel}")
}

/// [`ack_id`] with the partition the message came from (a cluster
/// node's stream says it), so an ack goes straight to that partition:
/// `{msg_id}~{partition}:{channel}`.
pub(crate) fn ack_id_from(channel: &str, msg_id: &str, partition: Option<&str>) -> String {
    match partition {
        Some(p) => format!("{msg_id}~{p}:{channel}"),
        None => ack_id(channel, msg_id),
    }
}

/// `(channel, msg_id)` of an [`ack_id`] (or [`ack_id_from`]); `None` for
/// a live stream's message id.
pub(crate) fn split_ack_id(id: &str) -> Option<(&str, &str)> {
    let (msg_id, channel) = id.split_once(':')?;
    let msg_id = msg_id.split_once('~').map_or(msg_id, |(m, _)| m);
    (!msg_id.is_empty() && !channel.is_empty()).then_some((channel, msg_id))
}

/// An [`ack_id`] made to name `partition` (a cluster's listing of the
/// partition's deliveries); `None` for any other id.
pub fn ack_id_on(id: &str, partition: u32) -> Option<String> {
    let (channel, msg_id) = split_ack_id(id)?;
    Some(ack_id_from(channel, msg_id, Some(&partition.to_string())))
}

/// The partition an [`ack_id_from`] names (a cluster routes the ack
/// there); `None` for any other id.
pub fn ack_partition(id: &str) -> Option<u32> {
    let (msg_part, _) = id.split_once(':')?;
    msg_part.split_once('~')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_id_names_its_channel_and_message_and_a_live_id_none() {
        let key = channel_key("ann", "app-1");
        let id = ack_id(&key, "m1");
        assert_eq!(split_ack_id(&id), Some((key.as_str(), "m1")));
        assert_eq!(split_ack_id("m1"), None);
        assert_eq!(split_ack_id(":x"), None);
        let routed = ack_id_from(&key, "m1", Some("7"));
        assert_eq!(split_ack_id(&routed), Some((key.as_str(), "m1")));
        assert_eq!(ack_partition(&routed), Some(7));
        assert_eq!(ack_partition(&id), None);
        assert_eq!(ack_id_from(&key, "m1", None), id);
        assert_eq!(ack_id_on(&id, 7).as_deref(), Some(routed.as_str()));
        assert_eq!(
            ack_id_on(&routed, 3).map(|r| ack_partition(&r)),
            Some(Some(3))
        );
        assert_eq!(
            ack_id_on("m1", 7),
            None,
            "a live stream's id names no channel"
        );
    }

    #[test]
    fn one_principal_keys_are_never_a_prefix_of_anothers() {
        // "a" must not own the subscriptions of "a/b"
        let of_a = channel_key("a", "");
        assert!(!channel_key("a/b", "x").starts_with(&of_a));
        assert!(!channel_key("a:b", "x").starts_with(&of_a));
        assert!(
            !channel_key("a", "x/y").contains('/'),
            "a channel id has no '/'"
        );
        assert!(channel_key("a", "x").starts_with(&of_a));
        assert_ne!(channel_key("a%2Fb", "x"), channel_key("a/b", "x"));
    }
}
