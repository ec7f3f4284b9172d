// probe URL: GET URL from inside a pod with the pod's service account token
// (if mounted), verifying the apiserver against the mounted CA; prints status and body.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	tc := &tls.Config{}
	if ca, err := os.ReadFile(sa + "ca.crt"); err == nil {
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(ca)
		tc.RootCAs = p
	} else {
		tc.InsecureSkipVerify = true
	}
	req, _ := http.NewRequest("GET", os.Args[1], nil)
	if tok, err := os.ReadFile(sa + "token"); err == nil {
		req.Header.Set("Authorization", "Bearer "+string(tok))
	}
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}).Do(req)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 300 {
		b = b[:300]
	}
	fmt.Println(resp.Status, string(b))
}
