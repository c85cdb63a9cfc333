// Package ports shows what listens inside a sandbox to HTTP clients,
// through the agent's pipe and never through a port on the sandbox: the
// port proxy (a tenant's request for /v1/sandboxes/{id}/ports/{port}/...
// passed to 127.0.0.1:{port} in the sandbox, bodies, server-sent events
// and WebSocket included) and preview links, which let a browser without
// the tenant's token see one port of one sandbox until the link expires
// or is revoked.
//
// A link's token is self-contained and signed by sandboxd (token.go): it
// names the tenant, the sandbox, the port, the expiry and the preview's
// id, so any replica can tell which sandbox a request is for and route it
// to its owner, and the owner can check it without a lookup. Revocations
// are kept in memory, in a file in the data dir and, where the backend
// can (Kubernetes), in an annotation on the sandbox, which every replica
// reads (previews.go).
package ports
