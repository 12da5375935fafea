package configtool

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"xce/adapters/confyaml"
	"xce/schema"
	"xce/sm"
)

// Info describes one config: a blob file or the one a conf/ dir points at.
type Info struct {
	Path       string
	Pointer    string // versioned name conf/current holds ("" for a blob file)
	SHA256     string
	Tag        uint64
	Generation uint64
	Size       int
	ModTime    time.Time
	Stale      bool
	Config     *schema.ClusterConfig
}

// Inspect reads a blob file, a conf/ dir or a node dir (containing conf/)
// and verifies it: the pointer per seed 002 §3.2, the file's SHA-256
// against its name, the size limit and the protobuf decode.
func Inspect(path string, staleAfter time.Duration, now time.Time) (*Info, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	info := &Info{Path: path}
	file := path
	if st.IsDir() {
		dir := path
		if _, err := os.Stat(filepath.Join(path, sm.ConfDir)); err == nil {
			dir = filepath.Join(path, sm.ConfDir)
		}
		ptr, err := os.ReadFile(filepath.Join(dir, "current"))
		if err != nil {
			return nil, fmt.Errorf("read pointer: %w", err)
		}
		name, err := sm.ParsePointer(ptr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "current"), err)
		}
		info.Pointer = name
		file = filepath.Join(dir, name)
	}
	fst, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if fst.Size() > sm.MaxConfigSize {
		return nil, fmt.Errorf("%s: %w: %d bytes", file, schema.ErrBlobTooBig, fst.Size())
	}
	blob, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(blob)
	if info.Pointer != "" && !sm.NameMatches(info.Pointer, sum) {
		return nil, fmt.Errorf("%s: SHA-256 %s does not match its name — corrupted", file, hex.EncodeToString(sum[:6]))
	}
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	info.SHA256, info.Tag, info.Generation, info.Size = hex.EncodeToString(sum[:]), sm.Tag(sum), c.GetConfigGeneration(), len(blob)
	info.ModTime = fst.ModTime()
	info.Stale = staleAfter > 0 && now.Sub(info.ModTime) > staleAfter
	info.Config = c
	return info, nil
}

// Print writes the summary and the YAML view.
func (i *Info) Print(w io.Writer) error {
	y, err := confyaml.Marshal(i.Config)
	if err != nil {
		return err
	}
	if i.Pointer != "" {
		fmt.Fprintf(w, "# conf/current -> %s\n", i.Pointer)
	}
	fmt.Fprintf(w, "# file: %s (%d bytes, modified %s)\n# sha256: %s\n# tag: %016x\n# generation: %d\n# stale: %v\n",
		i.Path, i.Size, i.ModTime.UTC().Format(time.RFC3339), i.SHA256, i.Tag, i.Generation, i.Stale)
	_, err = w.Write(y)
	return err
}
