package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
)

// ErrServerCert marks a TLS handshake refused because the server's certificate
// is not the pinned one (the Incus client's servercerts/<remote>.crt).
var ErrServerCert = errors.New("the server's certificate is not the pinned one")

// Fingerprint is the SHA-256 of a certificate's DER bytes in hex: what `incus
// config trust list` and `incus info` show.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// PinnedTLS is the TLS configuration of a client that authenticates with
// client and trusts exactly the server certificate pinned: the server's leaf
// certificate must be byte for byte the pinned one (host names and expiry are
// not looked at, as the Incus client does for a self-signed server
// certificate); a mismatch fails the handshake with an error wrapping
// ErrServerCert. A pinned certificate that is a CA is used as the only root
// instead: the server's chain must lead to it and name serverName.
func PinnedTLS(client tls.Certificate, pinned *x509.Certificate, serverName string) *tls.Config {
	conf := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// The daemon asks for a client certificate without naming CAs; send ours always.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &client, nil },
	}
	if pinned.IsCA {
		pool := x509.NewCertPool()
		pool.AddCert(pinned)
		conf.RootCAs = pool
		return conf
	}
	want := pinned.Raw
	// Verification by the system roots is replaced by the pin, which
	// VerifyConnection checks on every connection (resumed ones too).
	conf.InsecureSkipVerify = true
	conf.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return &ServerCertError{Want: Fingerprint(want)}
		}
		got := cs.PeerCertificates[0].Raw
		if !bytes.Equal(got, want) {
			return &ServerCertError{Got: Fingerprint(got), Want: Fingerprint(want)}
		}
		return nil
	}
	return conf
}

// SystemTLS is the TLS configuration of a client that authenticates with
// client and verifies the server's certificate by the system's roots and
// serverName, as the Incus client does when no server certificate is pinned.
func SystemTLS(client tls.Certificate, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		ServerName:           serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &client, nil },
	}
}

// ServerCertError is a server certificate that is not the pinned one; it
// matches ErrServerCert.
type ServerCertError struct {
	Got, Want string // fingerprints (Fingerprint); Got "" when the server sent none
}

func (e *ServerCertError) Error() string {
	if e.Got == "" {
		return ErrServerCert.Error() + ": the server sent no certificate"
	}
	return fmt.Sprintf("%s: the server's certificate has fingerprint %s, the pinned one %s", ErrServerCert, e.Got, e.Want)
}

func (e *ServerCertError) Is(target error) bool { return target == ErrServerCert }

// IsServerCert tells whether err is a handshake refused by the pin.
func IsServerCert(err error) bool { return errors.Is(err, ErrServerCert) }
