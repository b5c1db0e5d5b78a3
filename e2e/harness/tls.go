package harness

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
)

func caTransport(caPEM []byte) *http.Transport {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
}
