package integration

// What the scale benchmark reads of a node from outside: its process's
// resident memory (/proc/<pid>/status VmRSS) and its snapshots on disk.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/xce-hpc/xce/cmd/xcecli/clitool"
	"github.com/xce-hpc/xce/sm/wal"
)

// nodePID finds node i's running xcecontroller among /proc's processes by
// its command line (the harness keeps its exec.Cmd private).
func nodePID(c *clitool.Cluster, i int) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	exe := filepath.Join(c.Bin, "xcecontroller")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 0 && args[0] == exe && argValue(args, "--name") == c.Names[i] && filepath.Dir(argValue(args, "--workdir")) == c.Dir {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no running xcecontroller process of %s under %s", c.Names[i], c.Dir)
}

func argValue(args []string, flag string) string {
	for k := 0; k+1 < len(args); k++ {
		if args[k] == flag {
			return args[k+1]
		}
	}
	return ""
}

// rssBytes is VmRSS of pid.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// nodeRSS is VmRSS of node i's process.
func nodeRSS(c *clitool.Cluster, i int) (int64, error) {
	pid, err := nodePID(c, i)
	if err != nil {
		return 0, err
	}
	return rssBytes(pid)
}

// newestSnapshot is the size of node i's newest snapshot in data/snap
// (0 if there is none) and the bytes of every file there.
func newestSnapshot(c *clitool.Cluster, i int) (newest, total int64, err error) {
	dir := filepath.Join(c.NodeDir(i), wal.SnapDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	var newestLSN uint64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return 0, 0, err
		}
		total += info.Size()
		if lsn, ok := wal.ParseSnapshotName(e.Name()); ok && lsn >= newestLSN {
			newestLSN, newest = lsn, info.Size()
		}
	}
	return newest, total, nil
}
