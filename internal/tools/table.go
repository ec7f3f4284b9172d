package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/client"
)

// Bounds the tools state in their schemas. Limits beyond these are the
// server's (a user's maximum, a quota): it refuses with a message.
const (
	maxCodeChars   = 1 << 20   // the server's own bound on code
	maxTimeoutMS   = 86400000  // kiln's allowed range for a timeout
	minTimeoutMS   = 10        //
	maxInlineFiles = 100       // files sent with a one-shot run
	maxWriteChars  = 8 << 20   // one write_file's content
	defaultRead    = 64 << 10  // read_file's default max_bytes
	maxRead        = 1 << 20   // read_file's largest max_bytes
	maxTextPart    = 256 << 10 // one text part of a result (stdout, a display)
)

// Shared pieces of the schemas.
var (
	sessionIDProp = `"session_id": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The session's id, as create_session returned it."}`
	timeoutProp   = fmt.Sprintf(`"timeout_ms": {"type": "integer", "minimum": %d, "maximum": %d, "description": "Wall-clock limit in milliseconds. Default: the server's (30000 unless the administrator changed it); a user may be allowed less than the maximum."}`, minTimeoutMS, maxTimeoutMS)
	languageProp  = `"language": {"type": "string", "minLength": 1, "maxLength": 40, "default": "python", "description": "A language name or alias as list_languages shows it: python, javascript, typescript, bash, sql, go, c, cpp, java, rust, fortran, php, ruby."}`
	codeProp      = fmt.Sprintf(`"code": {"type": "string", "maxLength": %d, "description": "The source code to run."}`, maxCodeChars)
	stdinProp     = `"stdin": {"type": "string", "maxLength": 1048576, "description": "Text given to the program on standard input. Default: none (reading stdin fails at once)."}`
	pathProp      = `"path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "A path relative to the workspace (/workspace in the sandbox), such as data/input.csv; no .., no leading /."}`
	networkProp   = `"network": {"type": "object", "required": ["mode"], "additionalProperties": false, "description": "The session's (or run's) network policy. Default: {\"mode\": \"none\"}, no network at all. allowlist: HTTP and HTTPS through kiln's egress proxy to the listed hosts and the administrator's package indexes; the server may refuse hosts beyond what it allows you, saying so.", "properties": {
		"mode": {"type": "string", "enum": ["none", "allowlist"], "description": "none or allowlist."},
		"allow": {"type": "array", "maxItems": 256, "items": {"type": "string", "minLength": 1, "maxLength": 260}, "description": "Host names, for allowlist: example.com, *.example.com (its subdomains), either with an optional :port (no port: 80 and 443). No IP addresses."}}}`
	environmentProp = `"environment": {"type": "string", "minLength": 1, "maxLength": 63, "description": "A prebuilt environment of the server's, by name: its pinned Python and Node.js packages are there from the start, with no install. The administrator defines and builds them; an unknown or unbuilt name fails, naming those there are."}`
	packagesProp    = `"packages": {"type": "array", "maxItems": 100, "items": {"type": "string", "minLength": 1, "maxLength": 256}, "description": "Packages to install before the code runs: with pip for python, npm for javascript and typescript. Each a name with an optional version: requests, requests==2.31.0, left-pad@1.3.0 (no options, URLs or paths). Installing needs network access to the package index: a network policy that allows it (the session's, or run_code's network). Without one the call fails, saying so."}`
)

// tools is resolved on first use, not at package init: every sandbox
// stage (boot, agent, spawn) is this same binary, and resolving the
// schemas cost each of them about 1.5 ms and 0.5 MB before main.
var tools = sync.OnceValue(func() []Tool { return mustResolve(toolTable()) })

func toolTable() []Tool {
	return []Tool{
		{
			Name: "run_code",
			Description: "Run code once in a fresh, isolated sandbox (no network unless its network policy allows hosts), and return its output: stdout, stderr, " +
				"errors with tracebacks, plots as images, tables as text, and the files it created. Nothing is kept afterwards: " +
				"use create_session and execute_code to keep variables and files between calls. Python has numpy, pandas and matplotlib where installed.",
			Schema: schema(`{"type": "object", "required": ["code"], "additionalProperties": false, "properties": {
			` + languageProp + `, ` + codeProp + `,
			"files": {"type": "array", "maxItems": ` + fmt.Sprint(maxInlineFiles) + `, "description": "Files written into the workspace before the code runs.", "items": {
				"type": "object", "required": ["path"], "additionalProperties": false, "properties": {
				` + pathProp + `,
				"content": {"type": "string", "description": "The file's text (UTF-8)."},
				"content_base64": {"type": "string", "description": "The file's bytes, base64; instead of content, for binary files."}}}},
			` + stdinProp + `, ` + timeoutProp + `, ` + packagesProp + `, ` + environmentProp + `, ` + networkProp + `,
			"args": {"type": "array", "maxItems": 256, "items": {"type": "string", "maxLength": 4096}, "description": "Command-line arguments (program languages such as c, go, rust only)."}}}`),
			call: runCode,
		},
		{
			Name: "create_session",
			Description: "Start a session: a sandbox whose variables, imports and workspace files live between execute_code calls " +
				"until close_session or until it is idle for its TTL. Returns the session_id to pass to the other tools.",
			Schema: schema(`{"type": "object", "additionalProperties": false, "properties": {
			"languages": {"type": "array", "minItems": 1, "maxItems": 13, "items": {"type": "string", "minLength": 1, "maxLength": 40}, "default": ["python"], "description": "Languages the session will use; the first is the default of execute_code."},
			"idle_ttl_seconds": {"type": "integer", "minimum": 0, "maximum": 604800, "description": "End the session after this long without use. Default (0): the server's, one hour unless changed."},
			` + timeoutProp + `, ` + networkProp + `, ` + environmentProp + `}}`),
			call: createSession,
		},
		{
			Name: "execute_code",
			Description: "Run code in a session and return its output. State carries over: a variable set in one call is there in the next, " +
				"and files in the workspace (the working directory) stay. A cell that raises returns the error and traceback as text. " +
				"An expression on the last line of Python is shown as its value; matplotlib figures come back as images.",
			Schema: schema(`{"type": "object", "required": ["session_id", "code"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `, ` + codeProp + `,
			"language": {"type": "string", "minLength": 1, "maxLength": 40, "description": "One of the session's languages. Default: the session's first."},
			` + stdinProp + `, ` + timeoutProp + `, ` + packagesProp + `}}`),
			call: executeCode,
		},
		{
			Name: "install_packages",
			Description: "Install packages into a session with pip (for python) or npm (for javascript and typescript), and list what was " +
				"installed at which version, with each request to the package index. The session's kernels see them without a restart. " +
				"The session's network policy must allow the package index: create_session with network {\"mode\": \"allowlist\"}; " +
				"with the default (none) the call fails, saying so.",
			Schema: schema(`{"type": "object", "required": ["session_id", "manager"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `,
			"manager": {"type": "string", "enum": ["pip", "npm"], "description": "pip for python, npm for javascript and typescript."},
			"packages": {"type": "array", "maxItems": 100, "items": {"type": "string", "minLength": 1, "maxLength": 256}, "description": "Names with an optional version: requests, requests==2.31.0, left-pad@1.3.0 (no options, URLs or paths)."},
			"requirements": {"type": "string", "maxLength": 4096, "description": "A workspace path instead of (or as well as) packages: a requirements.txt for pip, a package.json for npm."}}}`),
			call: installPackages,
		},
		{
			Name:        "list_files",
			Description: "List a directory of a session's workspace: names, types (file, dir), sizes. The workspace is the code's working directory.",
			ReadOnly:    true,
			Schema: schema(`{"type": "object", "required": ["session_id"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `,
			"path": {"type": "string", "maxLength": 4096, "default": "", "description": "A directory relative to the workspace. Default: the workspace itself."}}}`),
			call: listFiles,
		},
		{
			Name:        "read_file",
			Description: "Read a file of a session's workspace. Text comes back as text, PNG and JPEG images as images; other binary files are described, not shown.",
			ReadOnly:    true,
			Schema: schema(`{"type": "object", "required": ["session_id", "path"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `, ` + pathProp + `,
			"max_bytes": {"type": "integer", "minimum": 1, "maximum": ` + fmt.Sprint(maxRead) + `, "default": ` + fmt.Sprint(defaultRead) + `, "description": "Read at most this many bytes; a longer file is cut and says so."}}}`),
			call: readFile,
		},
		{
			Name:        "write_file",
			Description: "Write a file into a session's workspace (the code's working directory), making parent directories as needed. Replaces an existing file unless overwrite is false.",
			Schema: schema(`{"type": "object", "required": ["session_id", "path"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `, ` + pathProp + `,
			"content": {"type": "string", "maxLength": ` + fmt.Sprint(maxWriteChars) + `, "description": "The file's text (UTF-8)."},
			"content_base64": {"type": "string", "description": "The file's bytes, base64; instead of content, for binary files."},
			"overwrite": {"type": "boolean", "default": true, "description": "false: fail if the file exists."}}}`),
			call: writeFile,
		},
		{
			Name:        "interrupt",
			Description: "Stop a session's running code (as Ctrl-C). The session keeps its variables when the language allows.",
			Schema: schema(`{"type": "object", "required": ["session_id"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `}}`),
			call: interrupt,
		},
		{
			Name:        "restart_session",
			Description: "Restart a session's interpreters: variables and imports are cleared, workspace files are kept.",
			Destructive: true,
			Schema: schema(`{"type": "object", "required": ["session_id"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `,
			"language": {"type": "string", "maxLength": 40, "description": "Restart only this language's interpreter. Default: all."}}}`),
			call: restartSession,
		},
		{
			Name:        "close_session",
			Description: "End a session: its sandbox and its workspace files are gone. Close sessions you no longer need; a user may have only a few at once.",
			Destructive: true,
			Schema: schema(`{"type": "object", "required": ["session_id"], "additionalProperties": false, "properties": {
			` + sessionIDProp + `}}`),
			call: closeSession,
		},
		{
			Name:        "list_languages",
			Description: "List the languages this kiln server runs, with versions, and whether each is a REPL (state between calls) or a compiled program.",
			ReadOnly:    true,
			Schema:      schema(`{"type": "object", "additionalProperties": false, "properties": {}}`),
			call:        listLanguages,
		},
	}
}

// schema compacts a schema written for people.
func schema(s string) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(fmt.Sprintf("tool schema: %v\n%s", err, s))
	}
	return b.Bytes()
}

type inFile struct {
	Path          string  `json:"path"`
	Content       *string `json:"content"`
	ContentBase64 *string `json:"content_base64"`
}

// bytes is the file's content, from exactly one of the two fields.
func (f inFile) bytes() ([]byte, error) {
	switch {
	case f.Content != nil && f.ContentBase64 != nil:
		return nil, fmt.Errorf("file %q: give content or content_base64, not both", f.Path)
	case f.ContentBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*f.ContentBase64)
		if err != nil {
			return nil, fmt.Errorf("file %q: content_base64 is not valid base64: %v", f.Path, err)
		}
		return b, nil
	case f.Content != nil:
		return []byte(*f.Content), nil
	}
	return []byte{}, nil
}

func runCode(ctx context.Context, c *client.Client, args json.RawMessage, p Progress) (*Result, error) {
	var in struct {
		Language  string                `json:"language"`
		Code      string                `json:"code"`
		Files     []inFile              `json:"files"`
		Stdin     string                `json:"stdin"`
		TimeoutMS int64                 `json:"timeout_ms"`
		Args      []string              `json:"args"`
		Packages  []string              `json:"packages"`
		Env       string                `json:"environment"`
		Network   *client.NetworkPolicy `json:"network"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	req := client.RunRequest{Language: cmpOr(in.Language, "python"), Code: in.Code, Stdin: in.Stdin, Args: in.Args,
		Limits: client.Limits{TimeoutMS: in.TimeoutMS}, Packages: in.Packages, Environment: in.Env, Network: in.Network}
	for _, f := range in.Files {
		b, err := f.bytes()
		if err != nil {
			return errorResult(err.Error()), nil
		}
		req.Files = append(req.Files, client.File{Path: f.Path, Content: b})
	}
	if p != nil {
		p("running " + req.Language)
	}
	out, err := c.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	r := fromCell(&out.Result)
	if out.Packages != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "%s installed first:", out.Packages.Manager)
		for _, pk := range out.Packages.Packages {
			fmt.Fprintf(&b, " %s %s;", pk.Name, pk.Version)
		}
		r.Content = append([]Part{{Type: PartText, Text: strings.TrimSuffix(b.String(), ";")}}, r.Content...)
	}
	r.Content = append(r.Content, runFiles(out.Files)...)
	return r, nil
}

func createSession(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	var in struct {
		Languages      []string              `json:"languages"`
		IdleTTLSeconds int64                 `json:"idle_ttl_seconds"`
		TimeoutMS      int64                 `json:"timeout_ms"`
		Network        *client.NetworkPolicy `json:"network"`
		Environment    string                `json:"environment"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	s, err := c.CreateSession(ctx, client.SessionRequest{Languages: in.Languages, IdleTTLSeconds: in.IdleTTLSeconds,
		Limits: client.Limits{TimeoutMS: in.TimeoutMS}, Network: in.Network, Metadata: map[string]string{"via": "tools"}, Environment: in.Environment})
	if err != nil {
		return nil, err
	}
	env := ""
	if s.Environment != "" {
		env = fmt.Sprintf("environment: %s (its packages are already installed)\n", s.Environment)
	}
	return textResult(fmt.Sprintf("session_id: %s\nlanguages: %s\nidle TTL: %d s (ends after this long unused)\nnetwork: %s\n%s"+
		"Pass session_id to execute_code, list_files, read_file, write_file; close_session when done.",
		s.ID, strings.Join(s.Languages, ", "), s.IdleTTLSeconds, networkText(s.Network), env)), nil
}

// networkText says a network policy in one line.
func networkText(p client.NetworkPolicy) string {
	p = p.Normal()
	if p.Mode != "allowlist" {
		return p.Mode + " (no network access)"
	}
	if len(p.Allow) == 0 {
		return "allowlist (the administrator's package indexes only)"
	}
	return "allowlist: " + strings.Join(p.Allow, ", ") + " (and the administrator's package indexes)"
}

func installPackages(ctx context.Context, c *client.Client, args json.RawMessage, p Progress) (*Result, error) {
	var in struct {
		SessionID    string   `json:"session_id"`
		Manager      string   `json:"manager"`
		Packages     []string `json:"packages"`
		Requirements string   `json:"requirements"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if len(in.Packages) == 0 && in.Requirements == "" {
		return errorResult("install_packages: give packages, requirements or both"), nil
	}
	req := client.PackageRequest{Manager: in.Manager, Packages: in.Packages, Requirements: in.Requirements}
	var res *client.PackageResult
	var err error
	if p == nil {
		res, err = c.InstallPackages(ctx, in.SessionID, req)
	} else {
		res, err = c.InstallPackagesStream(ctx, in.SessionID, req, func(ev client.Event) { progressOf(ev, p) })
	}
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s installed in %.1f s:\n", res.Manager, res.WallMS/1000)
	for _, pk := range res.Packages {
		note := ""
		switch {
		case pk.Present:
			note = " (already there)"
		case !pk.Requested:
			note = " (dependency)"
		}
		fmt.Fprintf(&b, "%s %s%s\n", pk.Name, pk.Version, note)
	}
	if len(res.Packages) == 0 {
		b.WriteString("(nothing)\n")
	}
	if e := egressText(res.Egress); e != "" {
		b.WriteString(e)
	}
	return textResult(strings.TrimRight(b.String(), "\n")), nil
}

func executeCode(ctx context.Context, c *client.Client, args json.RawMessage, p Progress) (*Result, error) {
	var in struct {
		SessionID string   `json:"session_id"`
		Code      string   `json:"code"`
		Language  string   `json:"language"`
		Stdin     *string  `json:"stdin"`
		TimeoutMS int64    `json:"timeout_ms"`
		Packages  []string `json:"packages"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	req := client.ExecRequest{Code: in.Code, Language: in.Language, Stdin: in.Stdin, TimeoutMS: in.TimeoutMS, Packages: in.Packages}
	var x *client.Execution
	var err error
	if p == nil {
		x, err = c.Exec(ctx, in.SessionID, req)
	} else {
		x, err = c.ExecStream(ctx, in.SessionID, req, func(ev client.Event) { progressOf(ev, p) })
	}
	if err != nil {
		return nil, err
	}
	if x.Result == nil {
		return textResult(fmt.Sprintf("execution %s: %s (no result)", x.ID, x.Status)), nil
	}
	r := fromCell(x.Result)
	r.Content = append(r.Content, artifactLinks(in.SessionID, x.Result.Artifacts)...)
	return r, nil
}

// progressOf turns a stream event into a progress message.
func progressOf(ev client.Event, p Progress) {
	switch ev.Type {
	case client.EventQueued:
		p(fmt.Sprintf("queued (position %d, waiting for a %s slot)", ev.Position, ev.Reason))
	case client.EventStarted:
		p("started")
	case client.EventStdout, client.EventStderr:
		p(truncate(ev.Data, 200))
	case client.EventDisplay:
		p("display output")
	}
}

func listFiles(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	var in struct {
		SessionID string `json:"session_id"`
		Path      string `json:"path"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	l, err := c.ListFiles(ctx, in.SessionID, in.Path)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d entries)\n", cmpOr(l.Path, "/workspace"), len(l.Entries))
	for _, e := range l.Entries {
		if e.Type == "dir" {
			fmt.Fprintf(&b, "%s/\n", e.Path)
		} else {
			fmt.Fprintf(&b, "%s\t%d bytes\n", e.Path, e.Size)
		}
	}
	return textResult(strings.TrimRight(b.String(), "\n")), nil
}

func readFile(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	var in struct {
		SessionID string `json:"session_id"`
		Path      string `json:"path"`
		MaxBytes  int64  `json:"max_bytes"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if in.MaxBytes == 0 {
		in.MaxBytes = defaultRead
	}
	w := &capWriter{max: in.MaxBytes}
	ctype, err := c.Download(ctx, in.SessionID, in.Path, w)
	if err != nil && !errors.Is(err, errCut) {
		return nil, err
	}
	return fileContent(in.Path, ctype, w.buf.Bytes(), w.cut), nil
}

func writeFile(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	var in struct {
		inFile
		SessionID string `json:"session_id"`
		Overwrite *bool  `json:"overwrite"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	b, err := in.bytes()
	if err != nil {
		return errorResult(err.Error()), nil
	}
	fi, err := c.Upload(ctx, in.SessionID, in.Path, bytes.NewReader(b), in.Overwrite == nil || *in.Overwrite)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("wrote %s (%d bytes)", fi.Path, fi.Size)), nil
}

func interrupt(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	id, err := sessionOnly(args)
	if err != nil {
		return nil, err
	}
	if err := c.Interrupt(ctx, id); err != nil {
		return nil, err
	}
	return textResult("interrupted the running code of session " + id + " (if any)"), nil
}

func restartSession(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	var in struct {
		SessionID string `json:"session_id"`
		Language  string `json:"language"`
	}
	if err := decode(args, &in); err != nil {
		return nil, err
	}
	if err := c.Restart(ctx, in.SessionID, in.Language); err != nil {
		return nil, err
	}
	return textResult("restarted session " + in.SessionID + ": variables cleared, files kept"), nil
}

func closeSession(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	id, err := sessionOnly(args)
	if err != nil {
		return nil, err
	}
	if err := c.DeleteSession(ctx, id); err != nil {
		return nil, err
	}
	return textResult("closed session " + id), nil
}

func sessionOnly(args json.RawMessage) (string, error) {
	var in struct {
		SessionID string `json:"session_id"`
	}
	err := decode(args, &in)
	return in.SessionID, err
}

func listLanguages(ctx context.Context, c *client.Client, args json.RawMessage, _ Progress) (*Result, error) {
	ls, err := c.Languages(ctx)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, l := range ls {
		state := "keeps state between execute_code calls"
		if l.Kind == "program" {
			state = "compiled program; each call builds and runs it"
		}
		fmt.Fprintf(&b, "%s", l.Name)
		if l.Version != "" {
			fmt.Fprintf(&b, " %s", l.Version)
		}
		if len(l.Aliases) > 0 {
			fmt.Fprintf(&b, " (aliases: %s)", strings.Join(l.Aliases, ", "))
		}
		if l.Available {
			fmt.Fprintf(&b, ": %s\n", state)
		} else {
			fmt.Fprintf(&b, ": not available here (%s)\n", l.Problem)
		}
	}
	return textResult(strings.TrimRight(b.String(), "\n")), nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

var errCut = errors.New("cut at max_bytes")

// capWriter keeps the first max bytes and stops the download there, so a
// large file is never read whole.
type capWriter struct {
	buf bytes.Buffer
	max int64
	cut bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - int64(w.buf.Len())
	if int64(len(p)) > room {
		w.buf.Write(p[:max(room, 0)])
		w.cut = true
		return 0, errCut
	}
	return w.buf.Write(p)
}
