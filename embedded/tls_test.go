package embedded_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/server"
)

// testCA makes a certificate authority and a server certificate for 127.0.0.1 signed by it,
// and writes the CA's certificate to a PEM file.
func testCA(t *testing.T) (server tls.Certificate, caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "execstore test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)

	caFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}

// TLS through the URI: the store connects to the front's TLS listener with a CA the test
// made, commits and reads; a client without TLS cannot open a store there.
func TestStoreOverTLS(t *testing.T) {
	ctx := context.Background()
	cert, caFile := testCA(t)
	srv, err := embedded.Start(ctx, embedded.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	defer srv.Close()

	uri := srv.URI() + "&tlsCAFile=" + url.QueryEscape(caFile)
	store, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: "tls"}})
	require.NoError(t, err)
	e := &execstore.Execution{ID: "e", DefinitionID: "d", Status: execstore.Running, Data: []byte("over tls")}
	_, err = store.Commit(ctx, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}}})
	require.NoError(t, err)
	got, err := store.Load(ctx, "e")
	require.NoError(t, err)
	assert.Equal(t, "over tls", string(got.Data))
	require.NoError(t, store.Close(ctx))

	plain, err := url.Parse(srv.URI())
	require.NoError(t, err)
	plain.RawQuery = "serverSelectionTimeoutMS=300"
	octx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	_, err = aio.Open(octx, plain.String(), aio.Options{Connection: server.Connection{Database: "tls"}})
	assert.Error(t, err, "a plaintext client reached the TLS listener")
}
