package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// droppedAttrs are anchor attributes of a PEP 503 page that point at files
// the mirror does not serve (PEP 658 metadata, signatures); without them
// pip downloads the distribution itself.
var droppedAttrs = map[string]bool{"data-dist-info-metadata": true, "data-core-metadata": true, "data-gpg-sig": true}

// rewritePyPI rewrites a PEP 503 project page so every file link comes back
// through the mirror as /pypi/files/..., keeping the #sha256= fragment that
// pip checks. Links that are not http(s) are dropped; a <base> is applied
// and removed.
func rewritePyPI(page []byte, pageURL, project string, sign func(...string) string) ([]byte, error) {
	base, err := url.Parse(pageURL)
	if err != nil {
		return nil, err
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	var out bytes.Buffer
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() == io.EOF {
				return out.Bytes(), nil
			}
			return nil, z.Err()
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			out.Write(z.Raw())
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "base":
			for _, a := range tok.Attr {
				if a.Key == "href" {
					if b, err := base.Parse(a.Val); err == nil {
						base = b
					}
				}
			}
		case "a":
			out.WriteString(rewriteAnchor(tok, base, project, sign))
		default:
			out.Write(z.Raw())
		}
	}
}

// rewriteAnchor writes one <a> with its href made a mirror link.
func rewriteAnchor(tok html.Token, base *url.URL, project string, sign func(...string) string) string {
	var b strings.Builder
	b.WriteString("<a")
	for _, a := range tok.Attr {
		if droppedAttrs[a.Key] || a.Namespace != "" {
			continue
		}
		val := a.Val
		if a.Key == "href" {
			u, err := base.Parse(a.Val)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				continue
			}
			frag := u.Fragment
			u.Fragment, u.RawFragment = "", ""
			u.User = nil // the index's credentials stay in the proxy
			key := "-"
			if alg, h, ok := strings.Cut(frag, "="); ok {
				if k, ok := parseKey(strings.ToLower(alg) + "-" + strings.ToLower(h)); ok {
					key = k.String()
				}
			}
			val = downloadLink(sign, "/pypi/files/", ecoPyPI, project, key, u.String())
			if frag != "" {
				val += "#" + frag
			}
		}
		fmt.Fprintf(&b, ` %s="%s"`, a.Key, html.EscapeString(val))
	}
	if tok.Type == html.SelfClosingTagToken {
		b.WriteString("/")
	}
	b.WriteString(">")
	return b.String()
}

// rewriteNPM rewrites a packument so that every version's dist.tarball is
// a mirror link on the proxy's own address (filesBase), keyed by the
// strongest hash dist.integrity declares.
func rewriteNPM(doc []byte, filesBase, name string, sign func(...string) string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	versions, _ := m["versions"].(map[string]any)
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		dist, _ := vm["dist"].(map[string]any)
		tarball, _ := dist["tarball"].(string)
		if tarball == "" {
			continue
		}
		u, err := url.Parse(tarball)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			delete(dist, "tarball")
			continue
		}
		u.User = nil // the registry's credentials stay in the proxy
		tarball = u.String()
		integrity, _ := dist["integrity"].(string)
		dist["tarball"] = downloadLink(sign, filesBase, ecoNPM, name, npmKey(integrity), tarball)
	}
	return json.Marshal(m)
}

// npmKey is the cache key of an npm dist.integrity (SRI: "sha512-<base64>",
// maybe several), or "-" when it names no sha512 or sha256 hash.
func npmKey(integrity string) string {
	best := "-"
	for f := range strings.FieldsSeq(integrity) {
		alg, b64, ok := strings.Cut(f, "-")
		if !ok || (alg != "sha512" && alg != "sha256") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(strings.SplitN(b64, "?", 2)[0])
		if err != nil {
			continue
		}
		if k, ok := parseKey(alg + "-" + hex.EncodeToString(raw)); ok && (best == "-" || alg == "sha512") {
			best = k.String()
		}
	}
	return best
}
