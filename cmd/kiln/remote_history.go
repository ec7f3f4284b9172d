package main

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/kiln-dev/kiln/client"
)

// historyCmd is `kiln history SESSION`: the session's executions, oldest
// first.
func historyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		rf     remoteFlags
		asJSON bool
	)
	fs := newFlagSet("kiln history", "kiln history [--json] SESSION", stderr, &rf)
	fs.BoolVar(&asJSON, "json", false, "print the executions, with their results, as a JSON array")
	pos, done, err := positional(fs, args, 1, 1)
	if done {
		return err
	}
	rc, err := rf.connect(stderr)
	if err != nil {
		return err
	}
	list := []client.Execution{}
	for x, err := range rc.AllExecutions(ctx, pos[0]) {
		if err != nil {
			return rc.fail(err)
		}
		list = append(list, x)
	}
	if asJSON {
		return printJSON(stdout, list)
	}
	t := newTable(stdout, "SEQ", "STATUS", "LANGUAGE", "STARTED", "DURATION", "CODE")
	for _, x := range list {
		dur := "-"
		if x.Ended != nil {
			dur = x.Ended.Sub(x.Started).Round(time.Millisecond).String()
		}
		t.row(strconv.FormatInt(x.Seq, 10), x.Status, x.Language, stamp(x.Started), dur, firstLine(x.Code, 50))
	}
	t.flush()
	return nil
}
