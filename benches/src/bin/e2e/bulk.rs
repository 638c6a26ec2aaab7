//! `bulk_retry`: `n` processes (default 100,000) that ended in an error
//! (the testkit's `FLAKY_CHARGE`), all retried by one bulk job (each then
//! waits at its `confirm` interrupt) at its default pace (1,000 a second;
//! `bulk_retry_fast`: at the most a job may ask, 100,000 a second), while
//! a client makes interrupt round trips one after another. The line: the
//! job's time (`secs`; `ops_per_sec` is retries a second), the round
//! trips' p50/p99 while it ran, and before it (`irq_p50_before_us`,
//! `irq_p99_before_us`).

use std::time::{Duration, Instant};

use acts::{BulkAction, BulkRequest, ChannelOptions, Message, ProcessQuery, Vars};
use acts_benches::percentile;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use acts_testkit::models::FLAKY_CHARGE;

use super::support::*;

pub(crate) async fn bulk_retry(
    url: &str,
    ns: &str,
    n: Option<usize>,
    fast: bool,
) -> Result<Outcome, String> {
    let n = n.unwrap_or(100_000);
    let e = engine(url, ns).await?;
    let exec = e.executor();
    exec.model()
        .deploy_yaml(FLAKY_CHARGE)
        .await
        .map_err(|e| e.to_string())?;
    exec.model()
        .deploy_yaml(ONE_IRQ)
        .await
        .map_err(|e| e.to_string())?;
    let setup = Instant::now();
    start_many(&exec, "flaky", n).await?;
    while !e.runtime().is_idle() && setup.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let failed = exec
        .proc()
        .count_matching(&ProcessQuery::new().ecode("declined"))
        .await
        .map_err(|e| e.to_string())?;
    if failed != n {
        return Err(format!("{failed} of {n} processes failed"));
    }
    let setup_secs = setup.elapsed().as_secs_f64();
    let mut rx = e
        .channel(ChannelOptions::default().with_model("one_irq"))
        .subscribe();
    let mut before = Vec::new();
    for _ in 0..300 {
        before.push(round_trip(&exec, &mut rx).await?);
    }
    before.sort_unstable();
    let rate = if fast {
        acts::MAX_BULK_RATE
    } else {
        acts::DEFAULT_BULK_RATE
    };
    let mut fixed = Vars::new();
    fixed.insert("fixed".into(), Value::Bool(true));
    let request = BulkRequest::new(BulkAction::Retry, ProcessQuery::new().ecode("declined"))
        .vars(fixed)
        .per_second(rate);
    let (t0, c0) = (Instant::now(), commits());
    let job = exec
        .bulk()
        .start(request)
        .await
        .map_err(|e| e.to_string())?;
    let mut lat = Vec::new();
    let job = loop {
        lat.push(round_trip(&exec, &mut rx).await?);
        let now = exec.bulk().get(&job.id).await.map_err(|e| e.to_string())?;
        if now.state.is_final() {
            break now;
        }
        if t0.elapsed() > Duration::from_secs(3600) {
            return Err("the job did not end within an hour".into());
        }
    };
    let job_secs = t0.elapsed().as_secs_f64();
    if job.done as usize != n {
        return Err(format!("the job retried {} of {n}: {job:?}", job.done));
    }
    let mut o = finish(e, n, t0, lat, c0).await;
    o.secs = job_secs;
    o.extra.insert("per_second".into(), json!(rate));
    o.extra.insert("setup_secs".into(), json!(setup_secs));
    o.extra
        .insert("irq_p50_before_us".into(), json!(percentile(&before, 0.50)));
    o.extra
        .insert("irq_p99_before_us".into(), json!(percentile(&before, 0.99)));
    o.extra
        .insert("irq_round_trips_during".into(), json!(o.latencies_us.len()));
    Ok(o)
}

/// One interrupt round trip: start, the question, the answer, the end
/// (µs).
async fn round_trip(
    exec: &acts::Executor,
    rx: &mut UnboundedReceiver<Message>,
) -> Result<u64, String> {
    let t = Instant::now();
    let p = exec
        .proc()
        .start("one_irq", Vars::new())
        .await
        .map_err(|e| e.to_string())?;
    let irq = loop {
        let m = next(rx).await?;
        if m.pid == p.pid && m.r#type == "act" && m.state == "created" {
            break m;
        }
    };
    exec.act()
        .complete(&p.pid, &irq.tid, Vars::new())
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let m = next(rx).await?;
        if m.pid == p.pid && m.r#type == "workflow" && m.state == "completed" {
            break;
        }
    }
    Ok(t.elapsed().as_micros() as u64)
}
