package egress

import (
	"container/list"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// errHashMismatch: the upstream's bytes are not the content the index
// declared. They are neither cached nor served.
var errHashMismatch = errors.New("the download does not match the hash its index declares")

// contentKey names content by its hash: "sha256-<hex>" or "sha512-<hex>".
// It is the cache's key and, as two path parts, its file name.
type contentKey struct {
	alg string // "sha256" or "sha512"
	hex string
}

func (k contentKey) String() string { return k.alg + "-" + k.hex }

// parseKey parses "sha256-<hex>" or "sha512-<hex>"; anything else (a weak
// or unknown hash, a bad length, a path trick) is not a key.
func parseKey(s string) (contentKey, bool) {
	alg, h, _ := strings.Cut(s, "-")
	size := map[string]int{"sha256": sha256.Size, "sha512": sha512.Size}[alg]
	if size == 0 || len(h) != 2*size {
		return contentKey{}, false
	}
	if _, err := hex.DecodeString(h); err != nil || strings.ToLower(h) != h {
		return contentKey{}, false
	}
	return contentKey{alg, h}, true
}

func (k contentKey) newHash() hash.Hash {
	if k.alg == "sha512" {
		return sha512.New()
	}
	return sha256.New()
}

// blobCache is the content-addressed download cache shared by all
// sessions: files under dir/<alg>/<hex>, verified when written and when
// read, at most max bytes, the least recently used evicted first. Recency
// is the file's mtime, so it survives a restart.
type blobCache struct {
	dir string
	max int64

	mu    sync.Mutex
	lru   *list.List // of *blob, front = most recent
	index map[contentKey]*list.Element
	size  int64
}

type blob struct {
	key  contentKey
	size int64
}

// openCache opens (making it if needed) the cache at dir and indexes what
// is there; stray temporary files of an earlier run are removed.
func openCache(dir string, max int64) (*blobCache, error) {
	c := &blobCache{dir: dir, max: max, lru: list.New(), index: map[contentKey]*list.Element{}}
	for _, d := range []string{"tmp", "sha256", "sha512"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("egress cache: %w", err)
		}
	}
	tmps, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	for _, e := range tmps {
		os.Remove(filepath.Join(dir, "tmp", e.Name()))
	}
	type found struct {
		b     blob
		mtime time.Time
	}
	var all []found
	for _, alg := range []string{"sha256", "sha512"} {
		entries, _ := os.ReadDir(filepath.Join(dir, alg))
		for _, e := range entries {
			k, ok := parseKey(alg + "-" + e.Name())
			info, err := e.Info()
			if !ok || err != nil || !info.Mode().IsRegular() {
				continue
			}
			all = append(all, found{blob{k, info.Size()}, info.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.After(all[j].mtime) })
	for _, f := range all {
		c.index[f.b.key] = c.lru.PushBack(&blob{f.b.key, f.b.size})
		c.size += f.b.size
	}
	c.mu.Lock()
	c.evict()
	c.mu.Unlock()
	return c, nil
}

func (c *blobCache) path(k contentKey) string { return filepath.Join(c.dir, k.alg, k.hex) }

// get opens the cached content for k after checking that it still hashes
// to k; a file that does not is removed and counts as a miss.
func (c *blobCache) get(k contentKey) (*os.File, int64, bool) {
	c.mu.Lock()
	_, ok := c.index[k]
	c.mu.Unlock()
	if !ok {
		return nil, 0, false
	}
	f, err := os.Open(c.path(k))
	if err != nil {
		c.drop(k)
		return nil, 0, false
	}
	h := k.newHash()
	n, err := io.Copy(h, f)
	if err != nil || hex.EncodeToString(h.Sum(nil)) != k.hex {
		f.Close()
		c.drop(k)
		return nil, 0, false
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, false
	}
	now := time.Now()
	os.Chtimes(c.path(k), now, now)
	c.mu.Lock()
	if e, ok := c.index[k]; ok {
		c.lru.MoveToFront(e)
	}
	c.mu.Unlock()
	return f, n, true
}

// drop forgets and removes k.
func (c *blobCache) drop(k contentKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[k]; ok {
		c.size -= e.Value.(*blob).size
		c.lru.Remove(e)
		delete(c.index, k)
	}
	os.Remove(c.path(k))
}

// put reads r to its end into a temporary file, checks that it hashes to
// k, and keeps it under k unless it alone is larger than the cache. It
// returns the content opened for reading either way (a file too large to
// keep is already unlinked, and goes when closed). Bytes that do not match
// k give errHashMismatch and are thrown away.
func (c *blobCache) put(k contentKey, r io.Reader) (*os.File, int64, error) {
	tmp, err := os.CreateTemp(filepath.Join(c.dir, "tmp"), "dl-*")
	if err != nil {
		return nil, 0, fmt.Errorf("egress cache: %w", err)
	}
	h := k.newHash()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err == nil && hex.EncodeToString(h.Sum(nil)) != k.hex {
		err = errHashMismatch
	}
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, 0, err
	}
	if n > c.max {
		os.Remove(tmp.Name())
		return tmp, n, nil
	}
	if err := os.Rename(tmp.Name(), c.path(k)); err != nil {
		os.Remove(tmp.Name())
		return tmp, n, nil
	}
	c.mu.Lock()
	if e, ok := c.index[k]; ok { // another request stored it meanwhile
		c.size -= e.Value.(*blob).size
		c.lru.Remove(e)
	}
	c.index[k] = c.lru.PushFront(&blob{k, n})
	c.size += n
	c.evict()
	c.mu.Unlock()
	return tmp, n, nil
}

// evict removes the least recently used content until the cache is within
// its bound. Open files of removed content stay readable until closed.
func (c *blobCache) evict() {
	for c.size > c.max && c.lru.Len() > 0 {
		e := c.lru.Back()
		b := e.Value.(*blob)
		c.lru.Remove(e)
		delete(c.index, b.key)
		c.size -= b.size
		if err := os.Remove(c.path(b.key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
	}
}

// Size is the bytes the cache holds now.
func (c *blobCache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
