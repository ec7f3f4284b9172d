package main

// kiln run through a local kiln serve (issue 10): POST /v1/run takes a
// sandbox whose interpreter has already started from the server's
// one-shot pool, which a CLI process that lives for one run cannot keep
// (a pool of its own would be made and thrown away with every run). So
// kiln run asks a running server when it finds one it may trust with a
// key, and runs on the local engine otherwise; the user sees the same
// output and exit status either way.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// installedAdminKey is where scripts/install and the systemd unit have
// kiln serve write its first admin key (mode 0600, root).
//
// A variable so that the tests' binary (built with -X) looks elsewhere:
// a kiln serve running on the test machine is not theirs to use.
var installedAdminKey = "/var/lib/kiln/admin.key"

var runServerHelp = `
Where the program runs: with --server URL (or $KILN_SERVER), on that kiln
server through POST /v1/run, its key from --key, $KILN_KEY or the client
config file as for the remote commands; its errors are reported, nothing
falls back. Otherwise, unless --local, on a kiln serve of this host when
one is found, whose one-shot pool has interpreters ready: the server of
$XDG_CONFIG_HOME/kiln/client.json (~/.config/kiln/client.json) when it is
a loopback address, with the file's key, else ` + defaultServer + ` with
` + installedAdminKey + ` when the caller can read it. A key is sent only
when the port's listening socket belongs to root or to the key file's
owner; a closed port, an error of the server or a run it cannot do
(--mount, --backend, stdin that is not UTF-8) runs on the local engine.
A run through the server prints its output when it ends; the local engine
streams it. -v or --stats says which ran.
`

// runServer is a kiln server that kiln run may send the run to.
type runServer struct {
	url, key string
	explicit bool   // --server or $KILN_SERVER: failures are reported
	why      string // where it was found, for -v
}

// findRunServer applies the rule of runServerHelp; nil means the local
// engine, with the reason.
func findRunServer(flagServer, flagKey string, getenv func(string) string, stderr io.Writer) (*runServer, string, error) {
	if s := first(flagServer, getenv("KILN_SERVER")); s != "" {
		server, key, err := remoteConfig(flagServer, flagKey, getenv, stderr)
		if err != nil {
			return nil, "", err
		}
		return &runServer{url: server, key: key, explicit: true, why: "given by --server or $KILN_SERVER"}, "", nil
	}
	if name := configPath(getenv); name != "" {
		if cfg, err := readClientConfig(getenv, io.Discard); err == nil && cfg.Server != "" && cfg.Key != "" {
			if ok, why := trustedLocal(cfg.Server, name); ok {
				return &runServer{url: cfg.Server, key: cfg.Key, why: "found through " + name}, "", nil
			} else if why != "" {
				return nil, why, nil
			}
		}
	}
	key, err := os.ReadFile(installedAdminKey)
	if err != nil {
		return nil, "no kiln serve found (" + installedAdminKey + ": " + reason(err) + ")", nil
	}
	if ok, why := trustedLocal(defaultServer, installedAdminKey); !ok {
		return nil, why, nil
	}
	return &runServer{url: defaultServer, key: strings.TrimSpace(string(key)), why: "found through " + installedAdminKey}, "", nil
}

// trustedLocal says whether a key kept in keyFile may go to server: a
// loopback address whose listening socket belongs to root or to the key
// file's owner, so that a user who binds the port while kiln serve is
// down gets no key. The why of a refusal is for -v.
func trustedLocal(server, keyFile string) (bool, string) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return false, ""
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() {
		return false, "" // not this host's: only --server sends a run there
	}
	owner, ok := fileOwner(keyFile)
	if !ok {
		return false, ""
	}
	n, _ := strconv.Atoi(port)
	uids := listenerUIDs(n)
	if len(uids) == 0 {
		return false, "no kiln serve listens on " + u.Host
	}
	for _, uid := range uids {
		if uid != 0 && uid != owner {
			return false, fmt.Sprintf("%s is held by uid %d, not by root or the owner of %s", u.Host, uid, keyFile)
		}
	}
	return true, ""
}

// serverCannot says why a run must stay on this host, or "".
func serverCannot(r engine.Run, backendSet bool) string {
	switch {
	case len(r.Mounts) > 0:
		return "--mount shows a folder of this host, which a server cannot"
	case backendSet:
		return "--backend chooses this host's backend"
	case !utf8.Valid(r.Stdin):
		return "stdin is not UTF-8 text, which the API's stdin field cannot carry"
	}
	return ""
}

// runOnServer sends the run to srv. ok false (with a nil error) means the
// server did not run it and the local engine should, for the reason
// given; a server given explicitly reports its failure instead.
func runOnServer(ctx context.Context, srv *runServer, r engine.Run) (res kiln.CellResult, ok bool, why string, err error) {
	// The local path's validation first, so bad input reads the same.
	if _, err := engine.PrepareRun(r, engine.DefaultCellBounds()); err != nil {
		return res, false, "", err
	}
	hc := &http.Client{Transport: &http.Transport{
		// Loopback answers a connect at once; a port that never accepts
		// must not hold the run either.
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext,
		Proxy:       http.ProxyFromEnvironment, // which never proxies loopback
	}}
	c, err := client.New(srv.url, srv.key, client.WithUserAgent("kiln/"+version), client.WithHTTPClient(hc))
	if err != nil {
		if srv.explicit {
			return res, false, "", kiln.Errorf(kiln.Invalid, "%s", strings.TrimPrefix(err.Error(), "kiln client: "))
		}
		return res, false, err.Error(), nil
	}
	out, err := c.Run(ctx, runRequest(r))
	switch {
	case ctx.Err() != nil:
		return res, false, "", ctx.Err()
	case err != nil && srv.explicit:
		return res, false, "", (&remote{server: srv.url, hasKey: srv.key != ""}).fail(err)
	case err != nil:
		return res, false, "the server at " + srv.url + " did not run it: " + strings.TrimPrefix(err.Error(), "kiln client: "), nil
	}
	return out.Result, true, "", nil
}

// runRequest is the run as the API's request; limits not given take the
// server's defaults, as they take the engine's locally.
func runRequest(r engine.Run) client.RunRequest {
	req := client.RunRequest{Language: r.Language, Code: r.Code, Args: r.Args, Stdin: string(r.Stdin), FileName: r.Name,
		BuildOptions: r.BuildOptions, Test: r.Test, Limits: client.Limits{
			TimeoutMS: millis(r.Limits.Timeout), MemoryBytes: r.Limits.MemoryBytes, Pids: r.Limits.Pids,
			CPUMillis: r.Limits.CPUMillis, OutputBytes: r.Limits.OutputBytes,
		}}
	for _, f := range r.Files {
		req.Files = append(req.Files, client.File{Path: f.Path, Content: f.Data, Mode: f.Mode})
	}
	return req
}

// replay writes a server's result as the local run's events would have:
// stdout, the rich outputs, stderr.
func replay(res kiln.CellResult, show func(kiln.Output), stdout, stderr io.Writer) {
	io.WriteString(stdout, res.Stdout)
	for _, o := range res.Outputs {
		show(o)
	}
	io.WriteString(stderr, res.Stderr)
}
