// tilecheck verifies a ledger's C2SP tlog-tiles with golang.org/x/mod/sumdb/tlog, as a
// third-party client would: it opens BASE/checkpoint with the log's verifier key
// (golang.org/x/mod/sumdb/note), then, over a tile reader fetching BASE/tile/<L>/<N>[.p/<W>]
// (files or HTTP), proves the record ENTRY-HASH-HEX at INDEX (tlog.ProveRecord,
// tlog.CheckRecord) and the older tree OLD-SIZE/OLD-ROOT-HEX (tlog.ProveTree,
// tlog.CheckTree) through tlog.TileHashReader, which checks every tile it reads against
// the checkpoint's root.
//
// Usage: tilecheck BASE VKEY INDEX ENTRY-HASH-HEX OLD-SIZE OLD-ROOT-HEX
// BASE is a directory or an http(s) URL; $TILES_TOKEN, when set, is sent as a bearer token.
// Prints "record ok" and "tree ok"; exit 1 with the error otherwise.
package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type reader struct{ base string }

func (r reader) fetch(path string) ([]byte, error) {
	if !strings.HasPrefix(r.base, "http://") && !strings.HasPrefix(r.base, "https://") {
		return os.ReadFile(filepath.Join(r.base, filepath.FromSlash(path)))
	}
	req, err := http.NewRequest("GET", strings.TrimSuffix(r.base, "/")+"/"+path, nil)
	if err != nil {
		return nil, err
	}
	if tok := os.Getenv("TILES_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

func (r reader) Height() int { return 8 }

// C2SP paths drop the height element of Go's tile/8/L/N[.p/W].
func (r reader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := r.fetch(strings.Replace(t.Path(), "tile/8/", "tile/", 1))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (r reader) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func hash(text string) tlog.Hash {
	var h tlog.Hash
	b, err := hex.DecodeString(text)
	if err != nil || len(b) != len(h) {
		fail("bad hash %q", text)
	}
	copy(h[:], b)
	return h
}

func main() {
	if len(os.Args) != 7 {
		fail("usage: tilecheck BASE VKEY INDEX ENTRY-HASH-HEX OLD-SIZE OLD-ROOT-HEX")
	}
	r := reader{os.Args[1]}
	verifier, err := note.NewVerifier(os.Args[2])
	if err != nil {
		fail("vkey: %v", err)
	}
	raw, err := r.fetch("checkpoint")
	if err != nil {
		fail("checkpoint: %v", err)
	}
	n, err := note.Open(raw, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size: %v", err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != 32 {
		fail("checkpoint root: %v", err)
	}
	var tree tlog.Tree
	tree.N = size
	copy(tree.Hash[:], root)
	thr := tlog.TileHashReader(tree, r)

	index, _ := strconv.ParseInt(os.Args[3], 10, 64)
	entry := hash(os.Args[4])
	rp, err := tlog.ProveRecord(tree.N, index, thr)
	if err != nil {
		fail("prove record: %v", err)
	}
	if err := tlog.CheckRecord(rp, tree.N, tree.Hash, index, tlog.RecordHash(entry[:])); err != nil {
		fail("check record: %v", err)
	}
	fmt.Println("record ok")

	oldN, _ := strconv.ParseInt(os.Args[5], 10, 64)
	tp, err := tlog.ProveTree(tree.N, oldN, thr)
	if err != nil {
		fail("prove tree: %v", err)
	}
	if err := tlog.CheckTree(tp, tree.N, tree.Hash, oldN, hash(os.Args[6])); err != nil {
		fail("check tree: %v", err)
	}
	fmt.Println("tree ok")
}
