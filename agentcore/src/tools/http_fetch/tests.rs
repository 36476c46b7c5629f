//! Fetches against servers on 127.0.0.1 that answer raw HTTP/1.1.

use std::io::ErrorKind;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A server on 127.0.0.1 that answers every connection with the same bytes and records what
/// it receives.
struct Server {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Answers with what `answer` makes of the server's own address.
    async fn start(answer: impl FnOnce(SocketAddr) -> Vec<u8>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answer = Arc::new(answer(addr));
        let server = Server { addr, connections: Arc::default(), requests: Arc::default() };
        let (connections, requests) = (server.connections.clone(), server.requests.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                let (answer, requests) = (answer.clone(), requests.clone());
                tokio::spawn(async move {
                    let Ok(request) = read_request(&stream).await else { return };
                    requests.lock().unwrap().push(request);
                    let _ = write_all(&stream, &answer).await;
                });
            }
        });
        server
    }

    async fn answering(answer: Vec<u8>) -> Server {
        Server::start(|_| answer).await
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A raw HTTP/1.1 response that closes the connection.
fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    [head.as_bytes(), body].concat()
}

fn redirect_to(location: &str) -> Vec<u8> {
    response("302 Found", &[("location", location)], b"")
}

/// The request's head and its body (as long as its content-length says).
async fn read_request(stream: &TcpStream) -> std::io::Result<String> {
    let mut received = Vec::new();
    loop {
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                .map_or(0, |(_, value)| value.trim().parse().unwrap());
            if received.len() >= end + 4 + length {
                return Ok(text);
            }
        }
        stream.readable().await?;
        let mut chunk = [0; 8192];
        match stream.try_read(&mut chunk) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

async fn write_all(stream: &TcpStream, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        stream.writable().await?;
        match stream.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn get(url: &str) -> FetchArgs {
    FetchArgs { url: url.into(), method: None, headers: None, body: None }
}

fn open() -> HttpFetch {
    HttpFetch::new(AddressPolicy { allow_private: true, allowed: vec![] }).unwrap()
}

fn allowing(allowed: &[SocketAddr]) -> HttpFetch {
    HttpFetch::new(AddressPolicy { allow_private: false, allowed: allowed.to_vec() }).unwrap()
}

const LOOPBACK_REFUSED: &str =
    "127.0.0.1 is a loopback address; private addresses are not allowed (tools.http.allow_private)";

#[tokio::test]
async fn a_get_returns_the_status_and_the_page_as_text() {
    let page = b"<!doctype html><html><head><title>Hi</title><script>x()</script></head>\
                 <body><p>Hello &amp; welcome</p><ul><li>one</li></ul></body></html>";
    let server = Server::answering(response(
        "200 OK",
        &[("content-type", "text/html; charset=utf-8")],
        page,
    ))
    .await;
    let text = open().fetch(&get(&server.url("/page"))).await.unwrap();
    assert_eq!(
        text,
        "HTTP 200 OK\nContent-Type: text/html; charset=utf-8\n\nHi\n\nHello & welcome\n\n- one"
    );
    assert!(server.requests()[0].starts_with("GET /page HTTP/1.1\r\n"));
}

#[tokio::test]
async fn private_addresses_are_refused_with_the_reason() {
    let server = Server::answering(response("200 OK", &[], b"secret")).await;
    let fetch = HttpFetch::new(AddressPolicy::default()).unwrap();
    let refused = fetch.fetch(&get(&server.url("/"))).await.unwrap_err().to_string();
    assert_eq!(refused, format!("refused: {LOOPBACK_REFUSED}"));
    let port = server.addr.port();
    let by_name =
        fetch.fetch(&get(&format!("http://localhost:{port}/"))).await.unwrap_err().to_string();
    let expected = "refused: localhost resolves to 127.0.0.1, a loopback address; private \
                    addresses are not allowed (tools.http.allow_private)";
    assert_eq!(by_name, expected);
    let mapped = fetch.fetch(&get(&format!("http://[::ffff:127.0.0.1]:{port}/"))).await;
    assert!(mapped.unwrap_err().to_string().contains("is a loopback address"));
    let metadata = fetch.fetch(&get("http://169.254.169.254/latest/meta-data/")).await;
    assert!(
        metadata
            .unwrap_err()
            .to_string()
            .starts_with("refused: 169.254.169.254 is a link-local address")
    );
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn allowed_addresses_match_exactly_by_ip_and_by_name() {
    let server = Server::answering(response("200 OK", &[], b"intranet")).await;
    let other = Server::answering(response("200 OK", &[], b"other")).await;
    let fetch = allowing(&[server.addr]);
    let by_ip = fetch.fetch(&get(&server.url("/"))).await.unwrap();
    assert!(by_ip.ends_with("\n\nintranet"), "{by_ip}");
    let by_name = fetch.fetch(&get(&format!("http://localhost:{}/", server.addr.port()))).await;
    assert!(by_name.unwrap().ends_with("\n\nintranet"));
    let other_port = fetch.fetch(&get(&format!("http://localhost:{}/", other.addr.port()))).await;
    assert!(
        other_port.unwrap_err().to_string().starts_with("refused: localhost resolves to 127.0.0.1")
    );
    assert_eq!(other.connections(), 0);
}

#[tokio::test]
async fn a_redirect_to_a_refused_address_is_refused_before_it_is_followed() {
    let b = Server::answering(response("200 OK", &[], b"secret")).await;
    let a = Server::answering(redirect_to(&b.url("/secret"))).await;
    let refused = allowing(&[a.addr]).fetch(&get(&a.url("/"))).await.unwrap_err().to_string();
    let expected = format!("refused: the redirect to {}: {LOOPBACK_REFUSED}", b.url("/secret"));
    assert_eq!(refused, expected);
    assert_eq!(a.requests().len(), 1);
    assert_eq!(b.connections(), 0);

    // By name, the resolver refuses it: it knows the redirect's port.
    let by_name = format!("http://localhost:{}/secret", b.addr.port());
    let a = Server::answering(redirect_to(&by_name)).await;
    let refused = allowing(&[a.addr]).fetch(&get(&a.url("/"))).await.unwrap_err().to_string();
    assert!(refused.starts_with("refused: localhost resolves to 127.0.0.1"), "{refused}");
    assert_eq!(a.requests().len(), 1);
    assert_eq!(b.connections(), 0);
}

#[tokio::test]
async fn redirects_are_followed_five_times_at_most() {
    let target = Server::answering(response("200 OK", &[], b"arrived")).await;
    let mut next = target.url("/");
    for _ in 0..5 {
        next = Server::answering(redirect_to(&next)).await.url("/");
    }
    assert!(open().fetch(&get(&next)).await.unwrap().ends_with("\n\narrived"));
    let looping = Server::start(|addr| redirect_to(&format!("http://{addr}/again"))).await;
    let refused = open().fetch(&get(&looping.url("/"))).await.unwrap_err().to_string();
    assert_eq!(refused, "refused: more than 5 redirects");
    assert_eq!(looping.requests().len(), 6);
}

#[tokio::test]
async fn a_post_arrives_with_its_headers_and_body() {
    let answer = response("201 Created", &[("content-type", "application/json")], b"{\"ok\":1}");
    let server = Server::answering(answer).await;
    let headers = BTreeMap::from([
        ("Content-Type".to_owned(), "application/json".to_owned()),
        ("X-Token".to_owned(), "abc 123".to_owned()),
    ]);
    let args = FetchArgs {
        url: server.url("/api?q=1"),
        method: Some("post".into()),
        headers: Some(headers),
        body: Some("{\"a\":\"é\"}".into()),
    };
    let text = open().fetch(&args).await.unwrap();
    assert_eq!(text, "HTTP 201 Created\nContent-Type: application/json\n\n{\"ok\":1}");
    let request = server.requests().remove(0);
    assert!(request.starts_with("POST /api?q=1 HTTP/1.1\r\n"), "{request}");
    let head = request.to_ascii_lowercase();
    assert!(head.contains("\r\ncontent-type: application/json\r\n"), "{request}");
    assert!(head.contains("\r\nx-token: abc 123\r\n"), "{request}");
    assert!(head.contains("\r\ncontent-length: 10\r\n"), "{request}");
    assert!(request.ends_with("\r\n\r\n{\"a\":\"é\"}"), "{request}");
}

#[tokio::test]
async fn a_long_body_is_cut_at_one_megabyte() {
    let body = vec![b'a'; 3 * 1024 * 1024];
    let server =
        Server::answering(response("200 OK", &[("content-type", "text/plain")], &body)).await;
    let text = open().fetch(&get(&server.url("/big"))).await.unwrap();
    let shown = text.strip_prefix("HTTP 200 OK\nContent-Type: text/plain\n\n").unwrap();
    let shown = shown.strip_suffix("\n[cut: the response was longer than 1 MB]").unwrap();
    assert_eq!(shown.len(), MAX_BODY);
    assert!(shown.bytes().all(|b| b == b'a'));
}

#[tokio::test]
async fn binary_content_is_described_not_shown() {
    let png = response("200 OK", &[("content-type", "image/png")], &[0x89, b'P', 0, 1]);
    let server = Server::answering(png).await;
    let text = open().fetch(&get(&server.url("/x.png"))).await.unwrap();
    assert_eq!(
        text,
        "HTTP 200 OK\nContent-Type: image/png\n\n[binary content of type image/png, 4 bytes, not shown]"
    );
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let held = listener.accept().await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(held);
    });
    let policy = AddressPolicy { allow_private: true, allowed: vec![] };
    let fetch = HttpFetch::with_timeout(policy, Duration::from_millis(300)).unwrap();
    let late = fetch.fetch(&get(&format!("http://{addr}/"))).await.unwrap_err().to_string();
    assert_eq!(late, "timeout: no complete answer within 0.3 s");
}

#[tokio::test]
async fn bad_arguments_are_explained_without_a_request() {
    let fetch = open();
    let with = |url: &str, method: Option<&str>, body: Option<&str>| FetchArgs {
        url: url.into(),
        method: method.map(Into::into),
        headers: None,
        body: body.map(Into::into),
    };
    let explain = async |args: FetchArgs| fetch.fetch(&args).await.unwrap_err().to_string();
    assert!(explain(get("not a url")).await.starts_with("bad URL 'not a url': "));
    let ftp = explain(get("ftp://example.com/file")).await;
    assert_eq!(ftp, "refused: ftp://example.com/file is not an http or https URL");
    let put = explain(with("http://example.com", Some("PUT"), None)).await;
    assert_eq!(put, "method 'PUT' is not supported: use GET or POST");
    let get_body = explain(with("http://example.com", None, Some("x"))).await;
    assert_eq!(get_body, "a body is sent with POST only; use method POST");
    let mut host = get("http://example.com");
    host.headers = Some(BTreeMap::from([("Host".to_owned(), "internal".to_owned())]));
    assert_eq!(explain(host).await, "header 'host' is set by the tool; leave it out");
}

#[test]
fn the_arguments_refuse_unknown_fields_and_match_the_schema() {
    let args: FetchArgs = serde_json::from_value(json!({ "url": "https://example.com" })).unwrap();
    assert_eq!(args.url, "https://example.com");
    let unknown = serde_json::from_value::<FetchArgs>(json!({ "url": "x", "timeout": 3 }));
    assert!(unknown.unwrap_err().to_string().contains("unknown field `timeout`"));
    let schema = parameters();
    assert_eq!(schema["required"], json!(["url"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    let properties = schema["properties"].as_object().unwrap();
    let mut names: Vec<_> = properties.keys().collect();
    names.sort();
    assert_eq!(names, ["body", "headers", "method", "url"]);
}
