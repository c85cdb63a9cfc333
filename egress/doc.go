// Package egress holds the policy that decides where a sandbox in network
// mode "proxy" may connect, and the proxy that enforces it. The policy does
// no networking: the proxy asks it about a host name before resolving it,
// and again about every address the name resolved to before connecting.
//
// # Proxy
//
// A Proxy holds what every sandbox of a daemon shares (resolver overrides,
// upstream trust, the certificate authority, limits); a Gate is one
// sandbox's way out. Gate.Serve speaks the HTTP proxy protocol on one client
// connection: CONNECT opens a TLS tunnel whose ClientHello must name the
// host it was opened for, any other method is a plain-HTTP request with an
// absolute URL. The proxy resolves names itself and dials only an address it
// decided. When a secret names the host, the tunnel is intercepted: TLS is
// terminated with a leaf certificate from the Authority, each request is
// decided again, the secret's header is set, and the request goes to the
// decided address over TLS verified against the proxy's own trust. Every
// refusal before a tunnel opens reaches the program as an HTTP response whose
// body is one sentence; every decision is recorded.
//
// # Rules
//
// A rule is one of:
//
//   - a host name, "example.com", matching that name only;
//   - a wildcard, "*.example.com", matching every subdomain at any depth
//     ("a.example.com", "a.b.example.com") but NOT "example.com" itself;
//     allow both rules to reach both;
//   - a CIDR, "10.0.0.0/8" or "fd00::/8", matching literal addresses and
//     resolved addresses; a bare address, "127.0.0.1" or "::1", is the /32
//     or /128 CIDR.
//
// Any rule may carry a port, "example.com:443", "10.0.0.0/8:5432" or
// "[fd00::/8]:443"; without one it matches every port.
//
// # Decisions
//
// A deny rule that matches always wins; otherwise a connection is allowed
// only if an allow rule matches. Host-name rules never match an IP literal:
// a literal address is decided by CIDR rules only. An address that a name
// resolved to is refused when a deny CIDR holds it, or when it lies in a
// special range (loopback, private, unique-local, link-local with the cloud
// metadata address, multicast, unspecified, carrier-grade NAT, reserved)
// unless an allow CIDR lying inside that range names it explicitly: a broad
// "0.0.0.0/0" does not open 169.254.169.254, "169.254.169.254/32" does.
// Addresses from the operator's own resolver overrides are trusted as given.
//
// # Layers
//
// Deployment, tenant and sandbox each have a Policy; Layered combines them so
// a connection passes only when every layer allows it, which means a sandbox
// can narrow its tenant's policy but never widen it. The zero Policy allows
// nothing; a layer with no policy of its own is Unrestricted().
package egress
