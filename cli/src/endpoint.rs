//! A service's base URL, split for connecting, for the `Host` header, for
//! signing and for the socket: `http://` or `https://`,
//! `host[:port][/prefix]`.

/// How the connection is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    /// TLS: the certificate must be valid for [`Endpoint::host`].
    Https,
}

impl Scheme {
    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// The scheme of the WebSocket URL over the same carriage.
    fn socket(self) -> &'static str {
        match self {
            Scheme::Http => "ws",
            Scheme::Https => "wss",
        }
    }
}

/// An operations endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub scheme: Scheme,
    /// The URL without its trailing slashes: the default audience.
    pub base: String,
    /// `host[:port]` as written: the `Host` header.
    pub authority: String,
    /// The host without port or IPv6 brackets: the name the certificate
    /// must be valid for.
    pub host: String,
    /// `host:port` to connect to.
    pub address: String,
    /// The path prefix before the routes, without a trailing slash.
    pub prefix: String,
}

/// The socket's route below the prefix.
const SOCKET_ROUTE: &str = "/v1/ws";

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let base = url.trim_end_matches('/');
        let (scheme, rest) = match base.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => (Scheme::Http, rest),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => (Scheme::Https, rest),
            _ => return Err(format!("{url}: the endpoint is an http:// or https:// URL")),
        };
        let (authority, prefix) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let bad = || {
            format!(
                "{url}: the endpoint is http[s]://host[:port][/prefix], \
                 without user, query or fragment"
            )
        };
        if authority.is_empty()
            || authority.contains(['@', '?', '#'])
            || prefix.contains(['?', '#'])
        {
            return Err(bad());
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => {
                let (host, after) = bracketed.split_once(']').ok_or_else(bad)?;
                match after {
                    "" => (host, None),
                    _ => (host, Some(after.strip_prefix(':').ok_or_else(bad)?)),
                }
            }
            None => match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        if host.is_empty() || host.contains(['[', ']']) {
            return Err(bad());
        }
        let port = match port {
            None => scheme.default_port(),
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|_| port.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("{url}: the port {port:?} is not a number up to 65535"))?,
        };
        let address = if authority.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(Endpoint {
            scheme,
            base: base.to_owned(),
            authority: authority.to_owned(),
            host: host.to_owned(),
            address,
            prefix: prefix.to_owned(),
        })
    }

    /// The coordination socket's URL: `ws://` for `http://`, `wss://` for
    /// `https://`, the same authority and prefix, then `/v1/ws`.
    pub fn socket_url(&self) -> String {
        format!(
            "{}://{}{}{SOCKET_ROUTE}",
            self.scheme.socket(),
            self.authority,
            self.prefix
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8094").unwrap();
        assert_eq!(
            e,
            Endpoint {
                scheme: Scheme::Http,
                base: "http://127.0.0.1:8094".into(),
                authority: "127.0.0.1:8094".into(),
                host: "127.0.0.1".into(),
                address: "127.0.0.1:8094".into(),
                prefix: String::new(),
            }
        );
        let e = Endpoint::parse("http://proxy.example/api/operations/").unwrap();
        assert_eq!(e.base, "http://proxy.example/api/operations");
        assert_eq!(e.address, "proxy.example:80");
        assert_eq!(e.authority, "proxy.example");
        assert_eq!(e.prefix, "/api/operations");
        let e = Endpoint::parse("http://[::1]:9000/").unwrap();
        assert_eq!(e.address, "[::1]:9000");
        assert_eq!(e.host, "::1");
        assert_eq!(e.base, "http://[::1]:9000");
        assert_eq!(Endpoint::parse("http://[::1]").unwrap().address, "[::1]:80");
    }

    #[test]
    fn tls_endpoints() {
        let e = Endpoint::parse("https://lab.example/api/operations").unwrap();
        assert_eq!(
            e,
            Endpoint {
                scheme: Scheme::Https,
                base: "https://lab.example/api/operations".into(),
                authority: "lab.example".into(),
                host: "lab.example".into(),
                address: "lab.example:443".into(),
                prefix: "/api/operations".into(),
            }
        );
        let e = Endpoint::parse("HTTPS://127.0.0.1:8443/").unwrap();
        assert_eq!(e.scheme, Scheme::Https);
        assert_eq!(e.address, "127.0.0.1:8443");
        assert_eq!(e.host, "127.0.0.1");
        assert_eq!(e.prefix, "");
        let e = Endpoint::parse("https://[::1]/a/b").unwrap();
        assert_eq!(e.address, "[::1]:443");
        assert_eq!(e.host, "::1");
        assert_eq!(e.prefix, "/a/b");
    }

    #[test]
    fn socket_urls() {
        let url = |base: &str| Endpoint::parse(base).unwrap().socket_url();
        assert_eq!(url("http://127.0.0.1:8094"), "ws://127.0.0.1:8094/v1/ws");
        assert_eq!(
            url("https://lab.example/api/operations/"),
            "wss://lab.example/api/operations/v1/ws"
        );
        assert_eq!(url("https://[::1]:8443"), "wss://[::1]:8443/v1/ws");
        assert_eq!(url("http://h:1/p"), "ws://h:1/p/v1/ws");
    }

    #[test]
    fn refused_endpoints() {
        for bad in [
            "127.0.0.1:8094",
            "ftp://x",
            "ws://h",
            "http://",
            "https://",
            "http://u@h",
            "http://h/?q",
            "http://h/#f",
            "https://h:",
            "https://h:x",
            "https://h:+1",
            "https://h:65536",
            "https://[::1",
            "https://[::1]x",
            "https://:443",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
