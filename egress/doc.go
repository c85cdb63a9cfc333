// Package egress holds the policy that decides where a sandbox in network
// mode "proxy" may connect. It does no networking: the proxy asks it about a
// host name before resolving it, and again about every address the name
// resolved to before connecting.
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
