//! A real browser for the dashboard's tests: Debian's Chromium, headless, driven over
//! WebDriver (`chromedriver`) with `fantoccini`. Each test gets its own driver process on a
//! free port, killed when the [`Browser`] is dropped.

use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::wait::eventually;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The window sizes the dashboard is tested at: a desktop and a phone (an iPhone's 390 CSS
/// pixels).
pub const DESKTOP: (u32, u32) = (1280, 900);
pub const PHONE: (u32, u32) = (390, 844);
pub const SIZES: [(u32, u32); 2] = [DESKTOP, PHONE];

/// How long an element found and then swapped away by the page's live refresh (between the
/// find and the use: a stale reference) is looked for again.
const SWAP_RETRY: Duration = Duration::from_secs(15);

/// Whether `error` says the element was replaced after it was found (the live part of a page is
/// swapped in whole when it changes): finding it again gets the new one.
fn swapped(error: &fantoccini::error::CmdError) -> bool {
    error.is_stale_element_reference()
}

pub struct Browser {
    pub client: Client,
    driver: tokio::process::Child,
}

/// Chromium is chromedriver's child and outlives it: killing the driver alone left every test's
/// browser running (a thousand processes after a day of runs). The driver leads a process group
/// of its own, which Chromium's processes join, and the whole group goes with the `Browser`.
impl Drop for Browser {
    fn drop(&mut self) {
        let group = self.driver.id().and_then(|id| rustix::process::Pid::from_raw(id as i32));
        if let Some(group) = group {
            rustix::process::kill_process_group(group, rustix::process::Signal::KILL).ok();
        }
    }
}

impl Browser {
    /// A headless Chromium at desktop size, or `None` (with a note) where Chromium or its
    /// driver is not installed; CI installs both and sets `AGENTD_TEST_REQUIRE_BROWSER`.
    pub async fn start() -> Option<Self> {
        Self::start_with(&[]).await
    }

    /// A headless Chromium whose clock reads in `zone` (an IANA name, through `TZ`): what
    /// `Intl.DateTimeFormat().resolvedOptions().timeZone` answers in its pages.
    pub async fn start_in_zone(zone: &str) -> Option<Self> {
        Self::start_with(&[("TZ", zone)]).await
    }

    /// [`Browser::start`], the driver (and so Chromium) given `env` on top of this process's.
    async fn start_with(env: &[(&str, &str)]) -> Option<Self> {
        if !std::path::Path::new(CHROMIUM).exists() || !std::path::Path::new(CHROMEDRIVER).exists()
        {
            assert!(
                std::env::var_os("AGENTD_TEST_REQUIRE_BROWSER").is_none(),
                "AGENTD_TEST_REQUIRE_BROWSER is set but {CHROMIUM} or {CHROMEDRIVER} is missing"
            );
            eprintln!("browser test skipped: install Debian's chromium and chromium-driver");
            return None;
        }
        let port = free_port();
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let status = reqwest::Client::new();
        eventually(Duration::from_secs(20), "chromedriver answers", || {
            let status = status.clone();
            let url = format!("{url}/status");
            async move { status.get(url).send().await.is_ok() }
        })
        .await;
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,900", "--force-device-scale-factor=1"],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&url)
            .await
            .expect("a WebDriver session in Chromium");
        Some(Self { client, driver })
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Types `value` into the form field named `name` (inside `form` when given).
    pub async fn fill(&self, name: &str, value: &str) {
        self.type_into(&format!("[name='{name}']"), value).await;
    }

    /// Types `value` into the first element matching `css` (a field among others of its name).
    pub async fn type_into(&self, css: &str, value: &str) {
        let until = tokio::time::Instant::now() + SWAP_RETRY;
        loop {
            let field = self.find(css).await;
            field.clear().await.ok();
            match field.send_keys(value).await {
                Ok(()) => return,
                Err(e) if swapped(&e) && tokio::time::Instant::now() < until => continue,
                Err(e) => panic!("type into {css}: {e}"),
            }
        }
    }

    /// The first element matching `css`, waiting for it to appear.
    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
    }

    /// Clicks the first element matching `css`.
    pub async fn click(&self, css: &str) {
        let until = tokio::time::Instant::now() + SWAP_RETRY;
        loop {
            match self.find(css).await.click().await {
                Ok(()) => return,
                Err(e) if swapped(&e) && tokio::time::Instant::now() < until => continue,
                Err(e) => panic!("click {css}: {e}"),
            }
        }
    }

    /// Waits until the page's path is `path` (htmx navigations finish after the click returns).
    pub async fn wait_for_path(&self, path: &str) {
        self.until(&format!("the browser is at {path}"), || async {
            self.client.current_url().await.map(|u| u.path() == path).unwrap_or(false)
        })
        .await;
    }

    /// Waits until `condition` holds; failing, says where the browser is and what it shows.
    pub async fn until<F, Fut>(&self, what: &str, mut condition: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let until = tokio::time::Instant::now() + Duration::from_secs(20);
        while !condition().await {
            if tokio::time::Instant::now() > until {
                let url =
                    self.client.current_url().await.map(|u| u.to_string()).unwrap_or_default();
                let shown = self.text("main").await;
                panic!("within 20 s: {what}; the browser is at {url}, showing:\n{shown}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn path(&self) -> String {
        self.client.current_url().await.expect("current url").path().to_owned()
    }

    /// The visible text of the first element matching `css` ("" when there is none).
    pub async fn text(&self, css: &str) -> String {
        let until = tokio::time::Instant::now() + SWAP_RETRY;
        loop {
            let Ok(element) = self.client.find(Locator::Css(css)).await else {
                return String::new();
            };
            match element.text().await {
                Ok(text) => return text,
                Err(e) if swapped(&e) && tokio::time::Instant::now() < until => continue,
                Err(_) => return String::new(),
            }
        }
    }

    /// Runs `script` in the page and returns its value (WebDriver's own channel: the page's
    /// Content-Security-Policy does not apply to it).
    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, Vec::new()).await.unwrap_or_else(|e| panic!("{script}: {e}"))
    }

    pub async fn set_size(&self, width: u32, height: u32) {
        self.client.set_window_size(width, height).await.expect("resize the window");
    }

    /// Whether the page is as wide as the window at most (no sideways scrolling).
    pub async fn fits_width(&self) -> bool {
        let fits = "return document.documentElement.scrollWidth <= window.innerWidth";
        self.eval(fits).await.as_bool() == Some(true)
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &std::path::Path) {
        let png = self.client.screenshot().await.expect("a screenshot");
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}
