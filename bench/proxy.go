package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// latencyProxy is an in-process toxiproxy between the measured clients and the server, with a
// latency toxic on each direction, so that every round trip costs rtt more.
type latencyProxy struct {
	proxy *toxiproxy.Proxy
}

// startLatencyProxy listens on a free loopback port and forwards to upstream (host:port),
// delaying the requests by half of rtt and the responses by the rest. rtt is a whole number
// of milliseconds, toxiproxy's unit.
func startLatencyProxy(upstream string, rtt time.Duration) (*latencyProxy, error) {
	ms := rtt.Milliseconds()
	up, down := ms/2, ms-ms/2
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "bench", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("starting the latency proxy: %w", err)
	}
	for _, t := range []struct {
		stream string
		ms     int64
	}{{"upstream", up}, {"downstream", down}} {
		toxic := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"attributes":{"latency":%d}}`,
			t.stream, t.stream, t.ms)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			p.Stop()
			return nil, fmt.Errorf("adding the %s latency toxic: %w", t.stream, err)
		}
	}
	return &latencyProxy{proxy: p}, nil
}

// addr is the address the proxy listens on.
func (p *latencyProxy) addr() string { return p.proxy.Listen }

func (p *latencyProxy) close() { p.proxy.Stop() }

// proxied starts a latency proxy in front of the one server uri names and returns it with
// the URI that reaches the server through it. The URI connects directly, so that a replica
// set member's advertised address cannot lead the driver around the proxy.
func proxied(uri string, rtt time.Duration) (*latencyProxy, string, error) {
	cs, err := connstring.Parse(uri)
	if err != nil {
		return nil, "", fmt.Errorf("-rtt: %w", err)
	}
	if cs.Scheme == connstring.SchemeMongoDBSRV || len(cs.Hosts) != 1 {
		return nil, "", fmt.Errorf("-rtt needs a URI naming exactly one host (mongodb://host:port/), got %s", hostsOf(uri))
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, "", fmt.Errorf("-rtt: %w", err)
	}
	host := cs.Hosts[0]
	if !strings.Contains(host, ":") || strings.HasSuffix(host, "]") {
		host += ":27017"
	}
	p, err := startLatencyProxy(host, rtt)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.addr()
	q := u.Query()
	if q.Get("directConnection") == "" {
		q.Set("directConnection", "true")
	}
	u.RawQuery = q.Encode()
	return p, u.String(), nil
}
