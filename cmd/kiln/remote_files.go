package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

const filesUsage = `Usage:
  kiln files put SESSION LOCAL [REMOTE]      copy a file or directory into the workspace
  kiln files get SESSION REMOTE [LOCAL|-]    copy a workspace file here (- for stdout)
  kiln files get --archive tar|zip SESSION [DIR] [LOCAL|-]
                                             save a workspace directory as one archive
  kiln files ls SESSION [DIR]                list a workspace directory
  kiln files rm [-r] SESSION PATH...         delete workspace files (-r: directories too)

REMOTE paths are relative to the workspace. Run "kiln files COMMAND -h"
for a command's flags, and how the server and key are found.
`

// filesCmd is `kiln files ...`.
func filesCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return subcommand(ctx, filesUsage, args, stdout, stderr, map[string]func(context.Context, []string) error{
		"put": func(ctx context.Context, args []string) error { return filesPut(ctx, args, stdin, stderr) },
		"get": func(ctx context.Context, args []string) error { return filesGet(ctx, args, stdout, stderr) },
		"ls":  func(ctx context.Context, args []string) error { return filesList(ctx, args, stdout, stderr) },
		"rm":  func(ctx context.Context, args []string) error { return filesRemove(ctx, args, stderr) },
	})
}

const putSynopsis = `kiln files put [--no-overwrite] SESSION LOCAL [REMOTE]

LOCAL "-" is kiln's stdin (then REMOTE is needed). REMOTE defaults to
LOCAL's name in the workspace root; a REMOTE ending in "/" is a directory
to put LOCAL into. A directory is sent as one tar archive and unpacked
into REMOTE (default: a directory of LOCAL's name); symbolic links and
special files in it are skipped, with a warning.`

func filesPut(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) error {
	var (
		rf          remoteFlags
		noOverwrite bool
	)
	fs := newFlagSet("kiln files put", putSynopsis, stderr, &rf)
	fs.BoolVar(&noOverwrite, "no-overwrite", false, "fail instead of replacing an existing file")
	pos, done, err := positional(fs, args, 2, 3)
	if done {
		return err
	}
	session, local := pos[0], pos[1]
	remotePath := ""
	if len(pos) == 3 {
		remotePath = pos[2]
	}
	var src io.Reader = stdin
	isDir := false
	if local == "-" {
		if remotePath == "" || strings.HasSuffix(remotePath, "/") {
			fmt.Fprint(stderr, "kiln files put: stdin has no name; give REMOTE, the file to write\n\n")
			fs.Usage()
			return errUsage
		}
	} else {
		fi, err := os.Stat(local)
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "cannot read %s: %s", local, reason(err))
		}
		isDir = fi.IsDir()
		if !isDir && !fi.Mode().IsRegular() {
			return kiln.Errorf(kiln.Invalid, "%s is not a regular file or a directory", local)
		}
		name := filepath.Base(filepath.Clean(local))
		if remotePath == "" || strings.HasSuffix(remotePath, "/") {
			remotePath = path.Join(remotePath, name)
		}
		if !isDir {
			f, err := os.Open(local)
			if err != nil {
				return kiln.Errorf(kiln.Invalid, "cannot read %s: %s", local, reason(err))
			}
			defer f.Close()
			src = f
		}
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	if !isDir {
		_, err := rc.Upload(ctx, session, remotePath, src, !noOverwrite)
		return rc.fail(err)
	}
	// The archive is written while it is sent; a local read error ends
	// the body, and is the error worth reporting.
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := writeTar(pw, local, stderr)
		pw.CloseWithError(err)
		werr <- err
	}()
	_, err = rc.Extract(ctx, session, remotePath, "tar", pr)
	pr.CloseWithError(errUploadEnded) // unblocks the writer
	if tarErr := <-werr; tarErr != nil && !errors.Is(tarErr, errUploadEnded) {
		return tarErr
	}
	return rc.fail(err)
}

// errUploadEnded stops the archive writer once the upload has ended.
var errUploadEnded = errors.New("the upload ended")

const getSynopsis = `kiln files get [--archive tar|zip] SESSION REMOTE [LOCAL|-]

Writes REMOTE to LOCAL (default: REMOTE's name in the current
directory; into LOCAL when it is a directory), or to stdout with "-". The
file is written whole or not at all. A directory comes only as an archive
(--archive), saved as it is (default name: DIR.tar or DIR.zip): kiln
does not unpack what a server sends; unpack it with tar or unzip after
looking at it.`

func filesGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf      remoteFlags
		archive string
	)
	fs := newFlagSet("kiln files get", getSynopsis, stderr, &rf)
	fs.Var(choiceFlag{&archive, []string{"tar", "zip"}}, "archive", "save a directory as one archive: `tar|zip`")
	pos, done, err := positional(fs, args, 1, 3)
	if done {
		return err
	}
	if len(pos) == 1 && archive == "" {
		fs.Usage()
		return errUsage
	}
	session, remotePath, local := pos[0], "", ""
	if len(pos) > 1 {
		remotePath = pos[1]
	}
	if len(pos) > 2 {
		local = pos[2]
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	name := localName(remotePath)
	download := func(w io.Writer) error {
		_, err := rc.Download(ctx, session, remotePath, w)
		return err
	}
	if archive != "" {
		name += "." + archive
		download = func(w io.Writer) error { return rc.DownloadArchive(ctx, session, remotePath, archive, w) }
	} else {
		fi, err := rc.Stat(ctx, session, remotePath)
		if err != nil {
			return rc.fail(err)
		}
		if fi.Type == "dir" {
			return kiln.Errorf(kiln.Invalid, "%s is a directory; add --archive tar (or zip) to save it as an archive", clean(remotePath))
		}
	}
	if local == "-" {
		return rc.fail(download(stdout))
	}
	return rc.fail(saveFile(local, name, download))
}

// localName is the local file name for a remote path: its last element,
// or "workspace" for the root. It is never "." or "..".
func localName(remotePath string) string {
	name := path.Base(strings.Trim(remotePath, "/"))
	if name == "." || name == ".." || name == "/" || name == "" {
		return "workspace"
	}
	return name
}

// saveFile writes what download produces to local (a directory means
// name inside it; "" means name here), through a temporary file renamed
// at the end, so a failed download leaves nothing behind.
func saveFile(local, name string, download func(io.Writer) error) error {
	target := local
	if target == "" {
		target = name
	} else if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		target = filepath.Join(target, name)
	}
	f, err := os.CreateTemp(filepath.Dir(target), ".kiln-get-*")
	if err != nil {
		return kiln.Errorf(kiln.Invalid, "cannot write in %s: %s", filepath.Dir(target), reason(err))
	}
	defer os.Remove(f.Name()) // fails harmlessly after the rename
	if err := download(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return kiln.Errorf(kiln.Invalid, "cannot write %s: %s", target, reason(err))
	}
	if err := f.Close(); err != nil {
		return kiln.Errorf(kiln.Invalid, "cannot write %s: %s", target, reason(err))
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return kiln.Errorf(kiln.Invalid, "cannot write %s: %s", target, reason(err))
	}
	return nil
}

func filesList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		asJSON bool
	)
	fs := newFlagSet("kiln files ls", "kiln files ls [--json] SESSION [DIR]", stderr, &rf)
	fs.BoolVar(&asJSON, "json", false, "print the listing as JSON")
	pos, done, err := positional(fs, args, 1, 2)
	if done {
		return err
	}
	dir := ""
	if len(pos) == 2 {
		dir = pos[1]
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	list, err := rc.ListFiles(ctx, pos[0], dir)
	if err != nil {
		return rc.fail(err)
	}
	if asJSON {
		return printJSON(stdout, list)
	}
	printFiles(stdout, list.Entries)
	return nil
}

func printFiles(w io.Writer, entries []client.FileInfo) {
	t := newTable(w, "TYPE", "SIZE", "MODIFIED", "NAME")
	for _, e := range entries {
		size, name := strconv.FormatInt(e.Size, 10), e.Name
		if e.Type == "dir" {
			size, name = "-", name+"/"
		}
		t.row(e.Type, size, stamp(e.ModTime), name)
	}
	t.flush()
}

func filesRemove(ctx context.Context, args []string, stderr io.Writer) error {
	var (
		rf        remoteFlags
		recursive bool
	)
	fs := newFlagSet("kiln files rm", "kiln files rm [-r] SESSION PATH...", stderr, &rf)
	fs.BoolVar(&recursive, "r", false, "delete directories and what they hold")
	pos, done, err := positional(fs, args, 2, -1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	for _, p := range pos[1:] {
		err := rc.DeleteFile(ctx, pos[0], p, recursive)
		var prob *client.Problem
		if !recursive && errors.As(err, &prob) && prob.Code == string(kiln.Conflict) {
			// The server's words are for API clients; say the CLI's flag.
			return kiln.Wrap(kiln.Conflict, err, "%s is a directory that is not empty; kiln files rm -r deletes it and what it holds", clean(p))
		}
		if err != nil {
			return rc.fail(err)
		}
	}
	return nil
}
