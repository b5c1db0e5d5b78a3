package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is what the harness generates for one control plane: a CA, the API server's serving
// certificate signed by it, the service-account signing key pair and an admin bearer token.
type pki struct {
	caPEM      []byte
	certPath   string
	keyPath    string
	saPubPath  string
	saKeyPath  string
	tokensPath string
	adminToken string
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

func newPKI(dir string) (*pki, error) {
	p := &pki{
		certPath:   filepath.Join(dir, "apiserver.crt"),
		keyPath:    filepath.Join(dir, "apiserver.key"),
		saPubPath:  filepath.Join(dir, "sa.pub"),
		saKeyPath:  filepath.Join(dir, "sa.key"),
		tokensPath: filepath.Join(dir, "tokens.csv"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cdplace-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	servingTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, caCert, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.certPath, "CERTIFICATE", servingDER); err != nil {
		return nil, err
	}
	servingKeyDER, err := x509.MarshalECPrivateKey(servingKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.keyPath, "EC PRIVATE KEY", servingKeyDER); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.saKeyPath, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.saPubPath, "PUBLIC KEY", saPubDER); err != nil {
		return nil, err
	}

	token := make([]byte, 24)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	p.adminToken = hex.EncodeToString(token)
	// token,user,uid,"group1,group2": the harness's own clients and the controller manager are
	// cluster admins; the cdplace scheduler is not (it gets a ServiceAccount token, see Start).
	line := p.adminToken + `,cdplace-e2e-admin,cdplace-e2e-admin,"system:masters"` + "\n"
	if err := os.WriteFile(p.tokensPath, []byte(line), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}
