// Package egresstest starts real package servers on the host for the tests
// of sandboxd's egress proxy: a Python package index, an npm registry, a Git
// server (git http-backend behind basic auth), a Go module proxy, and a
// server of made-up bytes for curl and for downloads (Blob). Each
// speaks HTTPS with a certificate from a CA the test makes, for a host name
// the test chooses and for 127.0.0.1, and serves packages built when it
// starts; nothing is fetched from outside this machine.
//
// # Wiring a sandbox to them
//
// A server listens on 127.0.0.1 at a port of its own choosing. The test
// gives sandboxd the server's name in egress.hosts (`{"pypi.test":
// "127.0.0.1"}`), an allow rule for the name (and for 127.0.0.1/32, since
// the address is loopback), and CA.PEMFile in egress.ca_files. Programs in
// the sandbox then use the URLs the servers report (URL, IndexURL,
// RegistryURL, CloneURL, ProxyURL), all of the form https://NAME:PORT/.
//
// Who checks a server's certificate depends on the host's path through
// sandboxd. For a host with a secret (the Git server, whose password is a
// secret with basic_auth) sandboxd terminates TLS, and it verifies the
// server against egress.ca_files; the sandbox sees sandboxd's certificate.
// Every other host is tunnelled untouched, so the program in the sandbox
// verifies the server itself and must trust CA too: append CA.PEM to the
// sandbox's CA bundle (the file its SSL_CERT_FILE names), or hand a file
// holding it to the program (pip --cert, npm --cafile, curl --cacert).
//
// Every package answers the same way: called with "world" it returns
// Greeting, "Hello, world!", which its dependency's word "Hello" begins.
//
//   - Python: `pip install --index-url <PyPI.IndexURL> sbxdemo` (in a venv),
//     which also installs sbxwords; then
//     `python -c 'import sbxdemo; print(sbxdemo.greet("world"))'`.
//
//   - npm: `npm install --registry <NPM.RegistryURL> --no-audit --no-fund
//     sbx-greet`, which also installs sbx-words; then
//     `node -e 'console.log(require("sbx-greet").greet("world"))'`. Without
//     --no-audit npm also posts to the registry's audit route, which answers
//     404, and npm prints a warning only.
//
//   - Git: `git clone <Git.CloneURL>`; the server wants basic auth with
//     Git.User and Git.Password for every request, fetch and push alike
//     (in the secret case sandboxd adds them: write Git.Password to the
//     secret's value_file). Git.Refs and Git.Authorizations show what
//     a push changed and which credentials arrived.
//
//   - Go: WriteGoConsumer writes a module that requires example.test/greet
//     (which requires example.test/words), tidy but for its go.sum; with
//     GoProxy.Env in the environment, `go mod tidy` then `go build` make a
//     program that prints Greeting (or `go build` alone with
//     GOFLAGS=-mod=mod; `go mod download` alone fetches the zips but does
//     not write their go.sum lines, so a build after it still fails). The
//     environment a sandbox needs is GOPROXY=<GoProxy.ProxyURL>,
//     GONOSUMDB=example.test (the checksum database cannot vouch for
//     modules made at test time, and cannot be reached anyway;
//     GOSUMDB=off does the same for every module) and GOTOOLCHAIN=local
//     (so that no toolchain download is tried). Do not set
//     GOPRIVATE=example.test: it implies GONOPROXY, and go would try to
//     reach example.test directly.
//
//   - curl and downloads: Blob answers /hello and /bytes/<n>, paced with
//     ?rate=<bytes per second> for a download that stays open while a test
//     changes the policy; Blob.Downloads says whether it was cut.
//
// PlainHTTP makes any of them speak HTTP without TLS, for the proxy's
// plain-HTTP path. ListenOn moves one off the loopback, for a peer on
// Docker's bridge; LoopbackURL then still works when it listens on every
// address.
//
// Every server records its requests (method, path, Host, headers, TLS
// server name, status), capped, for a test to check what reached it.
package egresstest
