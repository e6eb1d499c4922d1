package dnsupdate

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fakeServer answers every query over TCP on loopback with NOERROR, signing the
// answer with secret ("" leaves it unsigned). It stands in for a server whose
// answers the client cannot verify, which a real server never sends.
func fakeServer(t *testing.T, keyName, secret string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: l, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if secret != "" {
			m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
		}
		_ = w.WriteMsg(m)
	})}
	if secret != "" {
		srv.TsigSecret = map[string]string{keyName: secret}
	}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return l.Addr().String()
}

// An answer whose TSIG does not verify, or that is not signed, is reported as
// such, never taken as the server's word (issue 12 item 3).
func TestAnswerVerification(t *testing.T) {
	key, err := NewKey("k", "hmac-sha256", "c2VjcmV0LXNlY3JldC1zZWNyZXQ=")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for what, secret := range map[string]string{"another secret": "b3RoZXItb3RoZXItb3RoZXI=", "unsigned": ""} {
		c := &Client{Server: fakeServer(t, key.Name, secret), Key: key}
		err := c.Check(ctx, "example.com.")
		var se *ServerError
		if !errors.As(err, &se) || se.Unverified == nil {
			t.Fatalf("%s: %v, want a ServerError with Unverified", what, err)
		}
		if !strings.Contains(err.Error(), "failed TSIG verification") || !strings.Contains(err.Error(), c.Server) {
			t.Errorf("%s: %q", what, err)
		}
		t.Logf("%s: %v", what, err)
		if _, err := c.Apply(ctx, "example.com.", nil, RRset{Name: "www.example.com.", Type: "A", TTL: 60, Records: []string{"192.0.2.1"}}); err == nil {
			t.Errorf("%s: apply took an unverified answer", what)
		}
	}
}
