package configtool

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/xce-hpc/xce/adapters/fileio"
	"github.com/xce-hpc/xce/schema"
	"github.com/xce-hpc/xce/schema/confyaml"
	"github.com/xce-hpc/xce/sm"
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
// and verifies it with the daemon's own load checks: the same bounded,
// regular-file-only reads (fileio), the pointer per seed 002 §3.2 and the
// versioned file (SHA-256 against its name, the size limit, the decode
// and the one config validation) — so verify says "ok" exactly when a
// booting node would load it.
func Inspect(path string, staleAfter time.Duration, now time.Time) (*Info, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	info := &Info{Path: path}
	var d sm.IODone
	var name string
	if st.IsDir() {
		base := path // the node dir: fileio paths are relative to it
		if _, err := os.Stat(filepath.Join(path, sm.ConfDir)); err != nil {
			base = filepath.Dir(filepath.Clean(path)) // path is the conf/ dir itself
		}
		ex := &fileio.Executor{Base: base}
		pointer := filepath.Join(base, sm.PointerPath)
		var problem string
		name, problem, _, _ = sm.ResolvePointer(ex.Exec(sm.FileOp{Op: sm.OpRead, Path: sm.PointerPath, MaxSize: sm.PointerReadLimit}))
		if problem != "" {
			return nil, fmt.Errorf("%s: %s", pointer, problem)
		}
		info.Pointer = name
		info.Path = filepath.Join(base, sm.ConfDir, name)
		d = ex.Exec(sm.FileOp{Op: sm.OpRead, Path: sm.ConfDir + "/" + name, MaxSize: sm.MaxConfigSize})
	} else {
		// A blob file outside a conf/ dir: the same read and checks, with
		// no name to match.
		ex := &fileio.Executor{Base: filepath.Dir(path)}
		d = ex.Exec(sm.FileOp{Op: sm.OpRead, Path: filepath.Base(path), MaxSize: sm.MaxConfigSize})
	}
	if problem := sm.VerifyVersioned(name, d); problem != "" {
		return nil, fmt.Errorf("%s: %s", info.Path, problem)
	}
	blob := d.Data
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil { // VerifyVersioned decoded it already: cannot happen
		return nil, fmt.Errorf("%s: %w", info.Path, err)
	}
	sum := sha256.Sum256(blob)
	info.SHA256, info.Tag, info.Generation, info.Size = hex.EncodeToString(sum[:]), sm.Tag(sum), c.GetConfigGeneration(), len(blob)
	info.ModTime = time.Unix(0, d.ModTime)
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
