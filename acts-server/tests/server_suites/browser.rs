//! The dashboard in a real browser: headless Chromium driven through
//! WebDriver (`chromedriver`, from Debian's `chromium-driver`, installed by
//! `scripts/setup.sh`). Signs in with a token, deploys the approval
//! example from the models page, starts a process from its model page,
//! answers its interrupt through the inbox form, and sees the process page
//! show `completed` — saving a screenshot of every page (desktop and
//! phone widths) under the test's output folder
//! (`$CARGO_TARGET_TMPDIR/dashboard-screenshots`, or
//! `ACTS_SCREENSHOTS_DIR`).

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use acts::Engine;
use acts_server::{Auth, TokenConfig, hash_token};
use base64::Engine as _;
use serde_json::{Value, json};

const APPROVAL: &str = include_str!("../../../examples/approval.yml");
const ROOT_TOKEN: &str = "root-browser-secret";
/// How long a page may take to show what the test waits for (a hang
/// guard: the test polls for the condition, never sleeps to pass).
const GUARD: Duration = Duration::from_secs(30);
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Driver {
    async fn start() -> Self {
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (Debian's chromium-driver; scripts/setup.sh installs it)");
        let d = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        let t0 = Instant::now();
        loop {
            if let Ok(r) = d.http.get(format!("{}/status", d.base)).send().await
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                return d;
            }
            assert!(t0.elapsed() < GUARD, "chromedriver did not get ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("JSON from chromedriver");
        v["value"].clone()
    }

    async fn session(&self) -> Session<'_> {
        let v = self
            .call(
                reqwest::Method::POST,
                "/session",
                Some(json!({"capabilities": {"alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": "/usr/bin/chromium",
                        "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                 "--disable-dev-shm-usage", "--window-size=1280,1000"]
                    }
                }}})),
            )
            .await;
        let id = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a browser session: {v}"))
            .to_owned();
        Session { d: self, id }
    }
}

struct Session<'a> {
    d: &'a Driver,
    id: String,
}

impl Session<'_> {
    async fn post(&self, path: &str, body: Value) -> Value {
        self.d
            .call(
                reqwest::Method::POST,
                &format!("/session/{}{path}", self.id),
                Some(body),
            )
            .await
    }

    async fn get(&self, path: &str) -> Value {
        self.d
            .call(
                reqwest::Method::GET,
                &format!("/session/{}{path}", self.id),
                None,
            )
            .await
    }

    async fn open(&self, url: &str) {
        self.post("/url", json!({"url": url})).await;
    }

    /// The element `css` selects, once it exists.
    async fn find(&self, css: &str) -> String {
        let t0 = Instant::now();
        loop {
            let v = self
                .post("/element", json!({"using": "css selector", "value": css}))
                .await;
            if let Some(id) = v[ELEMENT].as_str() {
                return id.to_owned();
            }
            assert!(t0.elapsed() < GUARD, "no element '{css}' appeared");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn text(&self, css: &str) -> String {
        let e = self.find(css).await;
        self.get(&format!("/element/{e}/text"))
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits until the text of `css` contains `want`.
    async fn wait_text(&self, css: &str, want: &str) {
        let t0 = Instant::now();
        loop {
            if self.text(css).await.contains(want) {
                return;
            }
            assert!(
                t0.elapsed() < GUARD,
                "'{css}' never said '{want}' (it says '{}')",
                self.text(css).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.post(&format!("/element/{e}/clear"), json!({})).await;
        self.post(&format!("/element/{e}/value"), json!({"text": text}))
            .await;
    }

    async fn click(&self, css: &str) {
        let e = self.find(css).await;
        self.post(&format!("/element/{e}/click"), json!({})).await;
    }

    async fn url(&self) -> String {
        self.get("/url")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    async fn screenshot(&self, dir: &std::path::Path, name: &str) {
        let b64 = self.get("/screenshot").await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("a screenshot"))
            .expect("base64 PNG");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("the screenshot is saved");
    }

    async fn resize(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await;
    }
}

fn screenshots_dir() -> PathBuf {
    let dir = std::env::var_os("ACTS_SCREENSHOTS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir).expect("the screenshot folder");
    dir
}

/// Ends the browser session, stops the server and checks it stopped
/// cleanly.
async fn finish(
    b: &Session<'_>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let _ =
        b.d.call(reqwest::Method::DELETE, &format!("/session/{}", b.id), None)
            .await;
    let _ = stop.send(());
    server
        .await
        .expect("the server task")
        .expect("the server stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_deploys_starts_answers_and_shows_a_process() {
    let engine = Engine::builder().start().await.expect("engine starts");
    let auth = Auth::from_tokens(&[TokenConfig {
        principal: "root".into(),
        roles: vec!["admin".into()],
        sha256: hash_token(ROOT_TOKEN),
    }])
    .expect("a valid token");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let site = format!("http://{}", listener.local_addr().expect("an address"));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(acts_server::serve(engine.clone(), auth, listener, async {
        let _ = stop_rx.await;
    }));
    let shots = screenshots_dir();
    let driver = Driver::start().await;
    let b = driver.session().await;

    // Sign in.
    b.open(&format!("{site}/#/models")).await;
    b.find("#token").await;
    b.screenshot(&shots, "01-sign-in").await;
    b.type_into("#token", ROOT_TOKEN).await;
    b.click("#signin").await;
    b.wait_text("#principal", "root").await;

    // Deploy the approval example from the models page.
    b.type_into("#deploy-text", APPROVAL).await;
    b.click("#deploy").await;
    b.wait_text("#toast", "Deployed approval").await;
    b.find("#start").await;
    b.open(&format!("{site}/#/models")).await;
    b.wait_text("a.model-link", "approval").await;
    b.screenshot(&shots, "02-models").await;

    // Start a process from the model page.
    b.click("a.model-link").await;
    b.find("#start").await;
    b.wait_text(".code", "acts.core.irq").await;
    b.type_into("input[name='var-amount']", "5000").await;
    b.screenshot(&shots, "03-model").await;
    b.click("#start").await;
    b.wait_text("#process-state", "running").await;
    let url = b.url().await;
    let pid = url
        .split("#/process/")
        .nth(1)
        .unwrap_or_else(|| panic!("the process page: {url}"))
        .to_owned();
    b.wait_text("#graph", "Manager approval").await;
    b.screenshot(&shots, "04-process-waiting").await;

    // An operator pauses it (the reason typed into the prompt), sees it
    // paused, and resumes it.
    b.click("#pause-process").await;
    b.post("/alert/text", json!({ "text": "audit" })).await;
    b.post("/alert/accept", json!({})).await;
    b.wait_text("#paused", "audit").await;
    let paused = engine
        .executor()
        .proc()
        .get(&pid)
        .await
        .expect("the process");
    assert_eq!(paused.paused.map(|p| p.reason), Some("audit".to_owned()));
    b.click("#resume-process").await;
    b.find("#pause-process").await;
    assert!(
        engine
            .executor()
            .proc()
            .get(&pid)
            .await
            .expect("the process")
            .paused
            .is_none()
    );

    // Answer the interrupt through the inbox form.
    b.open(&format!("{site}/#/inbox")).await;
    b.wait_text("#inbox", &pid).await;
    b.type_into(
        "#inbox form.answer textarea[name='vars']",
        r#"{"approved": true}"#,
    )
    .await;
    b.screenshot(&shots, "05-inbox").await;
    b.click("#inbox form.answer button.complete").await;
    b.wait_text("#inbox", "Nothing waits for you").await;

    // The process page shows it completed, with the answer.
    b.open(&format!("{site}/#/process/{pid}")).await;
    b.wait_text("#process-state", "completed").await;
    b.wait_text("main", "next by root").await;
    b.screenshot(&shots, "06-process-completed").await;
    let outputs = engine
        .executor()
        .proc()
        .get(&pid)
        .await
        .expect("the process")
        .outputs;
    assert_eq!(outputs.get("level"), Some(&json!("director")));

    b.open(&format!("{site}/#/processes")).await;
    b.wait_text("main table", &pid).await;
    b.screenshot(&shots, "07-processes").await;
    b.open(&format!("{site}/#/dead")).await;
    b.wait_text("main", "No dead letters").await;
    b.screenshot(&shots, "08-dead-letters").await;
    // A phone's width: the same pages fold to one column.
    b.resize(390, 844).await;
    b.open(&format!("{site}/#/processes")).await;
    b.wait_text("main table", &pid).await;
    b.screenshot(&shots, "09-processes-phone").await;
    b.open(&format!("{site}/#/process/{pid}")).await;
    b.wait_text("#process-state", "completed").await;
    b.screenshot(&shots, "10-process-phone").await;

    finish(&b, stop_tx, server).await;
}

/// Without tokens (the local admin, `acts serve`'s default) the dashboard
/// names the caller plainly and its own calls pass the local-access
/// checks: a deploy from the page (`application/yaml`, the page's own
/// origin) is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_without_tokens_shows_the_local_admin_and_deploys() {
    let engine = Engine::builder().start().await.expect("engine starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let site = format!("http://{}", listener.local_addr().expect("an address"));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(acts_server::serve(
        engine.clone(),
        Auth::none(),
        listener,
        async {
            let _ = stop_rx.await;
        },
    ));
    let driver = Driver::start().await;
    let b = driver.session().await;
    b.open(&format!("{site}/#/models")).await;
    b.wait_text("#principal", "local").await;
    let who = b.text("#principal").await;
    assert!(
        who.contains("admin") && !who.contains("null") && !who.contains("undefined"),
        "the header names the caller: {who:?}"
    );
    b.type_into("#deploy-text", APPROVAL).await;
    b.click("#deploy").await;
    b.wait_text("#toast", "Deployed approval").await;
    assert!(
        engine.executor().model().get("approval").await.is_ok(),
        "the page's deploy reached the engine"
    );
    // A start waiting for its concurrency key says so, in the list and on
    // its page (and offers no terminate: it has not started).
    let exec = engine.executor();
    let keyed = APPROVAL.replacen("id: approval", "id: keyed", 1).replacen(
        "ver:",
        "concurrency: { key: one }\nver:",
        1,
    );
    exec.model()
        .deploy_yaml(&keyed)
        .await
        .expect("the keyed model deploys");
    exec.proc()
        .start("keyed", Default::default())
        .await
        .expect("the first runs");
    let second = exec
        .proc()
        .start("keyed", Default::default())
        .await
        .expect("the second waits");
    assert_eq!(second.waiting_for.as_deref(), Some("concurrency"));
    b.open(&format!("{site}/#/processes")).await;
    b.wait_text("main table", "waits for its key").await;
    b.open(&format!("{site}/#/process/{}", second.pid)).await;
    b.wait_text("#waiting-for", "concurrency key one").await;
    let buttons = b.text("main").await;
    assert!(!buttons.contains("Terminate"), "{buttons}");
    // A process whose task waits at a step's key says so too.
    let desk = "id: desk\nver: '1'\nsteps:\n  - id: approve\n    uses: acts.core.irq\n    params: { key: approve }\n    concurrency: { key: the-desk }\n";
    exec.model()
        .deploy_yaml(desk)
        .await
        .expect("the desk deploys");
    exec.proc()
        .start("desk", Default::default())
        .await
        .expect("the first runs");
    let gated = exec
        .proc()
        .start("desk", Default::default())
        .await
        .expect("the second runs");
    b.open(&format!("{site}/#/process/{}", gated.pid)).await;
    b.wait_text(
        "#waiting-for",
        "at a step's or act's concurrency or rate key",
    )
    .await;

    // A bulk job's progress, and cancelling it from its page: a slow job
    // (one process a second) over 30 running processes.
    for _ in 0..30 {
        exec.proc()
            .start("approval", Default::default())
            .await
            .expect("a start");
    }
    let request = acts::BulkRequest::new(
        acts::BulkAction::Pause,
        acts::ProcessQuery::new().model("approval"),
    )
    .per_second(1);
    let job = exec.bulk().start(request).await.expect("the job starts");
    b.open(&format!("{site}/#/bulk")).await;
    b.wait_text("main table", &job.id).await;
    b.wait_text("main table", "pause").await;
    b.click("a.bulk-link").await;
    b.wait_text("#bulk-job-state", "running").await;
    b.wait_text("#bulk-job", "/ 30").await;
    b.click("#bulk-cancel").await;
    b.wait_text("#bulk-job-state", "cancelled").await;
    let cancelled = exec.bulk().get(&job.id).await.expect("the job");
    assert_eq!(cancelled.state, acts::BulkState::Cancelled, "{cancelled:?}");
    assert!(cancelled.done < 30, "{cancelled:?}");
    finish(&b, stop_tx, server).await;
}
