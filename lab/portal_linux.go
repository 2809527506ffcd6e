package lab

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/http"
	"time"
)

// PortalLoginPath is the captive portal's login page.
const PortalLoginPath = "/login"

// startPortal serves the captive portal on every Internet address (the
// nftables redirect of a portal path brings TCP 80 and 443 here): HTTP
// answers 302 to the login page (511, RFC 6585 §6, to anything but GET
// and HEAD), the login page itself 200; HTTPS is the same behind a
// self-signed certificate for PortalName only, so verification of any
// other name fails.
func (l *Lab) startPortal() error {
	login := "http://" + PortalName + PortalLoginPath
	mux := http.NewServeMux()
	mux.HandleFunc(PortalLoginPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body><form method=post><input name=accept type=submit value=Login></form></body></html>\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNetworkAuthenticationRequired)
			fmt.Fprintf(w, "<html><head><meta http-equiv=refresh content=\"0; url=%s\"></head></html>\n", login)
			return
		}
		http.Redirect(w, r, login, http.StatusFound)
	})
	cert, err := portalCert()
	if err != nil {
		return err
	}
	for _, s := range []struct {
		port int
		tls  bool
	}{{PortPortalHTTP, false}, {PortPortalHTTPS, true}} {
		ln, err := l.ListenTCP(fmt.Sprintf(":%d", s.port), false)
		if err != nil {
			return fmt.Errorf("captive portal on port %d: %w", s.port, err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		if s.tls {
			srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		}
		l.Go(func(ctx context.Context) {
			go func() {
				<-ctx.Done()
				srv.Close()
			}()
			if s.tls {
				_ = srv.ServeTLS(ln, "", "")
			} else {
				_ = srv.Serve(ln)
			}
		})
	}
	return nil
}

// portalCert is a fresh self-signed certificate for PortalName.
func portalCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: PortalName},
		DNSNames: []string{PortalName}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
