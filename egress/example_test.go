package egress_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"

	"github.com/sandboxd/sandboxd/egress"
)

// A Gate serves each proxied client connection with Serve; here the
// connections come from a loopback listener, where the daemon's come over
// the sandbox's pipe. pypi.test is an operator's resolver override.
func ExampleGate_Serve() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "simple index")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	proxy, err := egress.New(egress.Config{
		Hosts: map[string][]netip.Addr{"pypi.test": {netip.MustParseAddr("127.0.0.1")}},
	})
	if err != nil {
		panic(err)
	}
	policy, err := egress.ParsePolicy([]string{"pypi.test"}, nil)
	if err != nil {
		panic(err)
	}
	gate := proxy.Gate(egress.Identity{Tenant: "acme", Sandbox: "sb1"}, egress.Layered(policy), nil)
	defer gate.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go gate.Serve(context.Background(), c)
		}
	}()

	proxyURL, _ := url.Parse("http://" + ln.Addr().String())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	for _, u := range []string{"http://pypi.test:" + port + "/simple/", "http://pypi.org/simple/"} {
		resp, err := client.Get(u)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s\n", resp.StatusCode, body)
	}
	// Output:
	// 200 simple index
	// 403 sandboxd: egress to pypi.org:80 is not allowed for this sandbox; allowed: pypi.test. Ask the operator to add it.
}
