//! `acts.grpc.ActsService`: `Send` (one action of the table, for the
//! principal of the request's bearer token) and `OnMessage` (a durable
//! subscription when the request names a `client_id`, else a live
//! stream), each request checked the same way first.
//!
//! May use: the facade `acts`, tonic, the server's auth, streams, errors
//! and action table, and the room's `front`.

use std::pin::Pin;
use std::sync::Arc;

use acts::{ChannelOptions, Engine, Principal, Vars};
use axum::http::HeaderMap;
use futures_util::Stream;
use tonic::{Request, Response, Status};

use super::proto::acts_service_server::ActsService;
use super::proto::{Message, MessageOptions};
use crate::actions::{Call, Refusal, ack_id, channel_key};
use crate::actions::{apply_call, message_shape};
use crate::auth::Auth;
use crate::error::ApiError;
use crate::stream::{Streams, Subscription};

/// What the service runs its calls on.
#[derive(Clone)]
pub(crate) enum Target {
    /// One engine (`acts serve`).
    Engine(Engine),
    /// An HTTP front serving `/api/v1` (a cluster node's).
    Front(super::front::Front),
}

/// The service over one engine or a front.
pub(crate) struct Service {
    pub(crate) target: Target,
    pub(crate) auth: Arc<Auth>,
    pub(crate) streams: Arc<Streams>,
    /// Turns true when the server stops (open streams end then).
    pub(crate) stop: tokio::sync::watch::Receiver<bool>,
    /// Where an engine's acks go behind the answer (a front answers an
    /// ack once it is stored).
    pub(crate) acks: Option<Arc<crate::actions::Acks>>,
}

/// An API error as the gRPC status a client can act on.
pub(crate) fn status(e: ApiError) -> Status {
    Status::new(super::front::code_of(e.status.as_u16(), e.code), e.message)
}

fn refused(r: Refusal) -> Status {
    match r {
        Refusal::NotFound(_) => Status::not_found(r.to_string()),
        Refusal::Unsupported { .. } => Status::unimplemented(r.to_string()),
        Refusal::Invalid(m) => Status::invalid_argument(m),
        Refusal::Api(e) => status(e),
    }
}

impl Service {
    /// Who sends `req`: its bearer token's principal (the local admin on
    /// a server without tokens). A request from a web page (it carries
    /// `Origin`) is refused: no browser speaks this protocol, so one
    /// that tries is a page steering the user's browser at the server.
    /// Returns the request's headers too (a front gets its token).
    fn caller<T>(&self, req: &Request<T>) -> Result<(Principal, HeaderMap), Status> {
        if req.metadata().contains_key("origin") {
            return Err(Status::permission_denied(
                "a request from a web page (it carries Origin) is refused by the gRPC server",
            ));
        }
        let headers = req.metadata().clone().into_headers();
        let who = self.auth.caller(&headers).map_err(status)?;
        Ok((who, headers))
    }
}

/// A message stream's items.
type Messages = Pin<Box<dyn Stream<Item = Result<Message, Status>> + Send>>;

#[tonic::async_trait]
impl ActsService for Service {
    async fn send(&self, req: Request<Message>) -> Result<Response<Message>, Status> {
        let (who, headers) = self.caller(&req)?;
        let caller = req
            .extensions()
            .get::<crate::telemetry::CallerTrace>()
            .copied();
        let m = req.into_inner();
        let options: Vars = match m.data.as_deref() {
            None | Some(b"") => Vars::new(),
            Some(data) => serde_json::from_slice(data).map_err(|e| {
                Status::invalid_argument(format!(
                    "invalid message data (a JSON object of the action's options): {e}"
                ))
            })?,
        };
        tracing::debug!(action = %m.name, principal = %who.id, "grpc send");
        let value = match &self.target {
            Target::Engine(engine) => {
                let mut options = options;
                crate::actions::carry_trace(&m.name, caller.as_ref(), &mut options);
                let call = Call {
                    exec: engine.executor().as_principal(who.clone()),
                    engine: engine.clone(),
                    who,
                    options,
                    acks: self.acks.clone(),
                };
                apply_call(&m.name, call).await.map_err(refused)?
            }
            Target::Front(front) => front.send(&headers, &m.name, &options).await?,
        };
        let data = serde_json::to_vec(&value).map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(Message {
            name: m.name,
            seq: acts::long_id(),
            ack: (!m.seq.is_empty()).then_some(m.seq),
            data: Some(data),
        }))
    }

    type OnMessageStream = Messages;

    async fn on_message(&self, req: Request<MessageOptions>) -> Result<Response<Messages>, Status> {
        let (who, headers) = self.caller(&req)?;
        let o = req.into_inner();
        let engine = match &self.target {
            Target::Engine(engine) => engine,
            Target::Front(front) => {
                let key = (!o.client_id.is_empty()).then(|| channel_key(&who.id, &o.client_id));
                let path = match &key {
                    Some(k) => format!("/api/v1/channels/{}/stream", super::front::segment(k)),
                    None => "/api/v1/messages".to_owned(),
                };
                let path = format!("{path}?{}", query(&o));
                let messages = front.subscribe(&headers, path, key).await?;
                return Ok(Response::new(Box::pin(until_stopped(
                    messages,
                    self.stop.clone(),
                ))));
            }
        };
        let options = filters(&o);
        let exec = engine.executor().as_principal(who.clone());
        let (sub, channel) = if o.client_id.is_empty() {
            let channel = engine.channel(options);
            let format = Arc::new(|m: &acts::Message| message_shape(m, &m.id).to_string());
            let sub = Subscription::open_as(&self.streams, channel, &exec, &who, format);
            (sub.map_err(status)?, None)
        } else {
            who.check_operator("a durable subscription (OnMessage with a client_id)")
                .map_err(|e| status(e.into()))?;
            let key = channel_key(&who.id, &o.client_id);
            let channel = engine
                .channels()
                .durable(&key, options)
                .await
                .map_err(|e| status(e.into()))?;
            // A durable subscription's message carries its ack id as its
            // id (stable across re-sends, so still what a client
            // de-duplicates by): a client that acks by hand acks `m.id`.
            let owned = key.clone();
            let format = Arc::new(move |m: &acts::Message| {
                message_shape(m, &ack_id(&owned, &m.id)).to_string()
            });
            let sub = Subscription::open_as(&self.streams, channel.clone(), &exec, &who, format)
                .map_err(status)?;
            channel
                .resend_pending()
                .await
                .map_err(|e| status(e.into()))?;
            (sub, Some(key))
        };
        Ok(Response::new(Box::pin(stream(
            sub,
            channel,
            self.stop.clone(),
        ))))
    }
}

/// The query of a front's message stream for the filters of `o` (`""`
/// and `"*"` filter nothing).
fn query(o: &MessageOptions) -> String {
    let set = |v: &str| !v.is_empty() && v != "*";
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in [("type", &o.r#type), ("state", &o.state), ("uses", &o.uses)] {
        if set(value) {
            q.append_pair(key, value);
        }
    }
    if !o.options.is_empty() {
        let options: std::collections::BTreeMap<_, _> = o.options.iter().collect();
        q.append_pair("options", &serde_json::json!(options).to_string());
    }
    q.finish()
}

/// `messages` until the server stops.
fn until_stopped(
    messages: impl Stream<Item = Result<Message, Status>> + Send + 'static,
    stop: tokio::sync::watch::Receiver<bool>,
) -> impl Stream<Item = Result<Message, Status>> {
    let messages = Box::pin(messages);
    futures_util::stream::unfold(Some((messages, stop)), |state| async move {
        let (mut messages, mut stop) = state?;
        let next = tokio::select! {
            next = futures_util::StreamExt::next(&mut messages) => next,
            _ = stop.wait_for(|stopped| *stopped) => {
                let s = Status::unavailable("the server is stopping; subscribe again");
                return Some((Err(s), None));
            }
        };
        let item = next?;
        let go_on = item.is_ok().then_some((messages, stop));
        Some((item, go_on))
    })
}

/// The channel options of a subscription: `""` and `"*"` filter nothing.
fn filters(o: &MessageOptions) -> ChannelOptions {
    let set = |v: &str| !v.is_empty() && v != "*";
    let mut c = ChannelOptions::default();
    if set(&o.r#type) {
        c = c.with_type(o.r#type.clone());
    }
    if set(&o.state) {
        c = c.with_state(o.state.clone());
    }
    if set(&o.uses) {
        c = c.with_uses(o.uses.clone());
    }
    for (k, v) in &o.options {
        c = c.with_option(k.clone(), v.clone());
    }
    c
}

/// The messages of `sub` as protocol messages: `seq` is what `msg:ack`
/// takes (the delivery of a durable subscription on `channel`; a live
/// stream's message id). A client that reads too slowly is cut off with
/// `ResourceExhausted` (a durable subscription re-sends what was not
/// acknowledged when it is back).
fn stream(
    sub: Subscription,
    channel: Option<String>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> impl Stream<Item = Result<Message, Status>> {
    futures_util::stream::unfold(Some(sub), move |sub| {
        let channel = channel.clone();
        let mut stop = stop.clone();
        async move {
            let mut sub = sub?;
            let next = tokio::select! {
                next = sub.next() => next,
                _ = stop.wait_for(|stopped| *stopped) => {
                    let s = Status::unavailable("the server is stopping; subscribe again");
                    return Some((Err(s), None));
                }
            };
            match next {
                Ok(q) => {
                    let seq = match &channel {
                        Some(c) => ack_id(c, &q.id),
                        None => q.id.clone(),
                    };
                    let m = Message {
                        name: q.name.clone(),
                        seq,
                        ack: None,
                        data: Some(q.json.into_bytes()),
                    };
                    Some((Ok(m), Some(sub)))
                }
                Err(why) => {
                    let s = Status::resource_exhausted(format!(
                        "the client read too slowly ({why}); subscribe again (a durable \
                         subscription re-sends what was not acknowledged)"
                    ));
                    Some((Err(s), None))
                }
            }
        }
    })
}
