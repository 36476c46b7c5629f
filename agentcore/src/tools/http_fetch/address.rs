//! Which addresses a fetch may reach, checked where the address is known: IP literals in a URL
//! before sending and on every redirect, host names after DNS resolution, in the resolver
//! reqwest connects with (it never calls it for IP literals).
//!
//! The resolver is given a host name without its port, yet [`AddressPolicy::allowed`] holds
//! exact socket addresses. So [`scoped`] runs each fetch with the port of its URL in a task
//! local, which the redirect check updates on every hop and the resolver reads. Where that is
//! unavailable (a connection reqwest finishes in the background) the resolver sees no port and
//! admits private addresses only under `allow_private`: it fails closed.

use std::cell::Cell;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect::{Action, Attempt, Policy};

use super::{AddressPolicy, MAX_REDIRECTS};

/// Where to allow private addresses, for messages.
const HINT: &str = "private addresses are not allowed (tools.http.allow_private)";

tokio::task_local! {
    /// The port of the URL the current fetch is about to connect to.
    static TARGET_PORT: Cell<Option<u16>>;
}

/// Runs `fetch` (everything one fetch does, redirects included) with `port` as its target.
pub(super) async fn scoped<F: Future>(port: u16, fetch: F) -> F::Output {
    TARGET_PORT.scope(Cell::new(Some(port)), fetch).await
}

/// An error whose message is meant for the model as it is.
#[derive(Debug)]
pub(super) struct Explained(pub(super) String);

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Explained {}

/// The kinds of address that are not on the public internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Range {
    Loopback,
    Unspecified,
    /// 10/8, 172.16/12, 192.168/16, and the deprecated IPv6 site-local fec0::/10.
    Private,
    /// 169.254/16 (where cloud metadata answers) and fe80::/10.
    LinkLocal,
    /// 100.64/10, carrier-grade NAT.
    Shared,
    /// fc00::/7.
    UniqueLocal,
    Multicast,
    Broadcast,
    /// This-network, future-use, documentation, benchmarking, Teredo and the like.
    Reserved,
}

impl Range {
    fn describe(self) -> &'static str {
        match self {
            Range::Loopback => "a loopback address",
            Range::Unspecified => "an unspecified address",
            Range::Private => "a private address",
            Range::LinkLocal => "a link-local address (where cloud metadata services answer)",
            Range::Shared => "a shared (carrier-grade NAT) address",
            Range::UniqueLocal => "a unique-local address",
            Range::Multicast => "a multicast address",
            Range::Broadcast => "the broadcast address",
            Range::Reserved => "a reserved address",
        }
    }
}

/// The range `ip` lies in, or `None` for a public address. IPv6 forms that carry an IPv4
/// address (mapped, compatible, NAT64, 6to4) are judged by that address.
pub(super) fn classify(ip: IpAddr) -> Option<Range> {
    match ip {
        IpAddr::V4(ip) => classify_v4(ip),
        IpAddr::V6(ip) => classify_v6(ip),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<Range> {
    let [a, b, c, _] = ip.octets();
    let range = match (a, b) {
        _ if ip.is_unspecified() => Range::Unspecified,
        _ if ip.is_broadcast() => Range::Broadcast,
        (127, _) => Range::Loopback,
        (10, _) | (172, 16..=31) | (192, 168) => Range::Private,
        (169, 254) => Range::LinkLocal,
        (100, 64..=127) => Range::Shared,
        (224..=239, _) => Range::Multicast,
        (0, _) | (240..=255, _) | (198, 18..=19) => Range::Reserved,
        (192, 0) if c == 0 || c == 2 => Range::Reserved,
        (198, 51) if c == 100 => Range::Reserved,
        (203, 0) if c == 113 => Range::Reserved,
        _ => return None,
    };
    Some(range)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Range> {
    if ip.is_unspecified() {
        return Some(Range::Unspecified);
    }
    if ip.is_loopback() {
        return Some(Range::Loopback);
    }
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    let range = match s[0] {
        0xfe80..=0xfebf => Range::LinkLocal,
        0xfec0..=0xfeff => Range::Private,
        0xfc00..=0xfdff => Range::UniqueLocal,
        0xff00..=0xffff => Range::Multicast,
        // Documentation, Teredo (whose IPv4 address is hidden), NAT64 for local use.
        0x2001 if s[1] == 0x0db8 || s[1] == 0 => Range::Reserved,
        0x0064 if s[1] == 0xff9b && s[2] == 1 => Range::Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => Range::Reserved,
        _ => return None,
    };
    Some(range)
}

/// The IPv4 address an IPv6 address carries: mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
/// NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |high: u16, low: u16| Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)));
    match s {
        [0, 0, 0, 0, 0, 0xffff | 0, high, low] => v4(high, low),
        [0x0064, 0xff9b, 0, 0, 0, 0, high, low] => v4(high, low),
        [0x2002, high, low, ..] => v4(high, low),
        _ => None,
    }
}

impl AddressPolicy {
    /// The range that keeps `ip` out, or `None` when it may be reached. `port` is the port it
    /// would be reached on, when known: an exact entry of `allowed` needs it.
    fn refusal(&self, ip: IpAddr, port: Option<u16>) -> Option<Range> {
        let range = classify(ip)?;
        let listed = port.is_some_and(|port| {
            self.allowed.iter().any(|allowed| allowed.ip() == ip && allowed.port() == port)
        });
        (!self.allow_private && !listed).then_some(range)
    }

    /// Checks a URL before it is requested: its scheme, and its address when it is an IP
    /// literal (host names are checked once resolved). Its port when it passes.
    pub(super) fn check_url(&self, url: &Url) -> Result<u16, Explained> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Explained(format!("refused: {url} is not an http or https URL")));
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(Explained(format!("refused: {url} names no host")));
        };
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if let Ok(ip) = literal.parse::<IpAddr>()
            && let Some(range) = self.refusal(ip, Some(port))
        {
            return Err(Explained(format!("refused: {ip} is {}; {HINT}", range.describe())));
        }
        Ok(port)
    }

    /// Checks `url`'s scheme and, when its host is an IP literal, that address (which no
    /// resolver sees): before each connection to a user's MCP server, in case the policy
    /// changed since the URL was accepted.
    pub fn check_literal(&self, url: &str) -> Result<(), String> {
        let url = Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
        self.check_url(&url).map(|_| ()).map_err(|Explained(why)| why)
    }

    /// Checks where `url` leads now: its scheme, and every address its host resolves to
    /// (an MCP server's URL, before it is stored). Connections are checked again when made,
    /// by the resolver, so a name that moves to a private address later is still refused.
    pub async fn check_host(&self, url: &str) -> Result<(), String> {
        let url = Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
        let port = self.check_url(&url).map_err(|Explained(why)| why)?;
        let host = url.host_str().unwrap_or_default();
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if literal.parse::<IpAddr>().is_ok() {
            return Ok(());
        }
        let lookup = tokio::net::lookup_host((literal, port));
        let addresses = tokio::time::timeout(std::time::Duration::from_secs(5), lookup)
            .await
            .map_err(|_| format!("refused: {host} did not resolve within 5 s"))?
            .map_err(|e| format!("refused: {host} does not resolve: {e}"))?;
        for address in addresses {
            if let Some(range) = self.refusal(address.ip(), Some(port)) {
                return Err(format!(
                    "refused: {host} resolves to {}, {}; {HINT}",
                    address.ip(),
                    range.describe()
                ));
            }
        }
        Ok(())
    }

    /// A client whose connections reach only what this policy allows (resolved addresses
    /// checked, redirects not followed), for MCP servers users add.
    pub fn guarded_client(
        self: &Arc<Self>,
        timeout: std::time::Duration,
    ) -> Result<reqwest::Client, reqwest::Error> {
        reqwest::Client::builder()
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(timeout)
            .no_proxy()
            .referer(false)
            .redirect(Policy::none())
            .dns_resolver(GuardedResolver(Arc::clone(self)))
            .build()
    }

    /// The redirect policy of the client: at most [`MAX_REDIRECTS`], each checked like the
    /// first URL, and its port handed on to the resolver.
    pub(super) fn redirect_policy(self: Arc<Self>) -> Policy {
        Policy::custom(move |attempt| self.redirect(attempt))
    }

    fn redirect(&self, attempt: Attempt<'_>) -> Action {
        // `previous` starts with the first URL, which is no redirect.
        if attempt.previous().len() > MAX_REDIRECTS {
            let message = format!("refused: more than {MAX_REDIRECTS} redirects");
            return attempt.error(Explained(message));
        }
        let port = match self.check_url(attempt.url()) {
            Ok(port) => port,
            Err(Explained(why)) => {
                let why = why.trim_start_matches("refused: ");
                let message = format!("refused: the redirect to {}: {why}", attempt.url());
                return attempt.error(Explained(message));
            }
        };
        match TARGET_PORT.try_with(|target| target.set(Some(port))) {
            Ok(()) => attempt.follow(),
            Err(_) => attempt.error(Explained("refused: a redirect outside a fetch".into())),
        }
    }
}

/// Resolves host names with the system resolver and drops the addresses the policy refuses.
#[derive(Debug)]
pub(super) struct GuardedResolver(pub(super) Arc<AddressPolicy>);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.0);
        let host = name.as_str().to_owned();
        let port = TARGET_PORT.try_with(Cell::get).ok().flatten();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| Explained(format!("cannot resolve {host}: {e}")))?;
            let kept = admitted(&policy, &host, found, port)?;
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// The addresses `host` resolved to that may be reached; an error that names the first
/// refused one when none may.
fn admitted(
    policy: &AddressPolicy,
    host: &str,
    found: impl Iterator<Item = SocketAddr>,
    port: Option<u16>,
) -> Result<Vec<SocketAddr>, Explained> {
    let mut refused = None;
    let mut kept = Vec::new();
    for address in found {
        match policy.refusal(address.ip(), port) {
            None => kept.push(address),
            Some(range) => {
                refused.get_or_insert((address.ip(), range));
            }
        }
    }
    match (kept.is_empty(), refused) {
        (false, _) => Ok(kept),
        (true, Some((ip, range))) => Err(Explained(format!(
            "refused: {host} resolves to {ip}, {}; {HINT}",
            range.describe()
        ))),
        (true, None) => Err(Explained(format!("cannot resolve {host}: no address found"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_classified_by_range() {
        let table: [(&str, Option<Range>); 24] = [
            ("127.0.0.1", Some(Range::Loopback)),
            ("127.255.0.9", Some(Range::Loopback)),
            ("::1", Some(Range::Loopback)),
            ("0.0.0.0", Some(Range::Unspecified)),
            ("::", Some(Range::Unspecified)),
            ("10.1.2.3", Some(Range::Private)),
            ("172.16.0.1", Some(Range::Private)),
            ("172.31.255.255", Some(Range::Private)),
            ("192.168.1.1", Some(Range::Private)),
            ("169.254.169.254", Some(Range::LinkLocal)),
            ("fe80::1", Some(Range::LinkLocal)),
            ("100.64.0.1", Some(Range::Shared)),
            ("fd00::1", Some(Range::UniqueLocal)),
            ("224.0.0.1", Some(Range::Multicast)),
            ("ff02::1", Some(Range::Multicast)),
            ("255.255.255.255", Some(Range::Broadcast)),
            ("::ffff:10.0.0.1", Some(Range::Private)),
            ("::ffff:127.0.0.1", Some(Range::Loopback)),
            ("::ffff:169.254.169.254", Some(Range::LinkLocal)),
            ("::127.0.0.1", Some(Range::Loopback)),
            ("64:ff9b::a9fe:a9fe", Some(Range::LinkLocal)),
            ("2002:c0a8:0101::1", Some(Range::Private)),
            ("8.8.8.8", None),
            ("2606:4700::1111", None),
        ];
        for (ip, expected) in table {
            assert_eq!(classify(ip.parse().unwrap()), expected, "{ip}");
        }
        for public in ["172.32.0.1", "100.128.0.1", "1.1.1.1", "::ffff:8.8.8.8", "2002:0808:0808::"]
        {
            assert_eq!(classify(public.parse().unwrap()), None, "{public}");
        }
    }

    #[test]
    fn allowed_entries_are_exact_socket_addresses() {
        let a: SocketAddr = "10.0.0.5:11434".parse().unwrap();
        let policy = AddressPolicy { allow_private: false, allowed: vec![a] };
        assert_eq!(policy.refusal(a.ip(), Some(11434)), None);
        assert_eq!(policy.refusal(a.ip(), Some(22)), Some(Range::Private));
        assert_eq!(policy.refusal(a.ip(), None), Some(Range::Private));
        assert_eq!(policy.refusal("8.8.8.8".parse().unwrap(), None), None);
        let open = AddressPolicy { allow_private: true, allowed: vec![] };
        assert_eq!(open.refusal("169.254.169.254".parse().unwrap(), None), None);
    }

    #[test]
    fn urls_are_checked_by_scheme_and_literal_address() {
        let policy = AddressPolicy::default();
        let check = |url: &str| policy.check_url(&Url::parse(url).unwrap()).map_err(|e| e.0);
        assert_eq!(check("https://example.com/x"), Ok(443));
        assert_eq!(check("http://example.com:8080/"), Ok(8080));
        assert_eq!(
            check("http://127.0.0.1/"),
            Err("refused: 127.0.0.1 is a loopback address; private addresses are not allowed \
                 (tools.http.allow_private)"
                .into())
        );
        // The URL parser normalises other spellings of IPv4 addresses.
        assert!(check("http://2130706433/").unwrap_err().contains("127.0.0.1 is a loopback"));
        assert!(check("http://0x7f.1/").unwrap_err().contains("loopback"));
        assert!(check("http://[::ffff:a9fe:a9fe]/").unwrap_err().contains("link-local"));
        assert!(check("ftp://example.com/").unwrap_err().contains("not an http or https URL"));
        assert!(check("file:///etc/passwd").is_err());
    }
}
