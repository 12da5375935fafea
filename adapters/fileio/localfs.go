package fileio

import (
	"errors"
	"fmt"
)

// ErrNetworkFS reports a work directory on a network or user-space file
// system. The config store relies on local rename(2) atomicity and
// fsync(2) durability, which these do not guarantee (seed 002 §3.1): the
// caller logs FATAL and exits.
var ErrNetworkFS = errors.New("network file system refused")

// networkFS maps statfs(2) f_type magic numbers (linux/magic.h and the
// file systems' own headers) of refused file systems to names.
//
// Refused: NFS, SMB/CIFS (all three magics), AFS (both), Coda, Ceph,
// 9P (also WSL2's /mnt/c and virtio-9p shares), Lustre, GPFS, GFS2 and
// OCFS2 (cluster file systems whose semantics depend on the cluster lock
// manager), and FUSE: a FUSE file system may be backed by anything (sshfs,
// s3fs, glusterfs) and gives no rename/fsync guarantee we can check.
// Rootless containers whose root is fuse-overlayfs must mount the work
// directory from a local volume.
var networkFS = map[uint32]string{
	0x6969:     "nfs",
	0x517B:     "smb",
	0xFF534D42: "cifs",
	0xFE534D42: "smb2",
	0x65735546: "fuse",
	0x5346414F: "afs",
	0x6B414653: "afs (kafs)",
	0x73757245: "coda",
	0x00C36400: "ceph",
	0x01021997: "9p",
	0x0BD00BD0: "lustre",
	0x47504653: "gpfs",
	0x01161970: "gfs2",
	0x7461636F: "ocfs2",
}

// classifyFS returns the name of a refused file system type, or "".
func classifyFS(magic uint32) string { return networkFS[magic] }

// CheckLocalFS refuses a path on a network file system with an error
// wrapping ErrNetworkFS that names the path and the file system type. A
// failing statfs(2) is returned as is (not ErrNetworkFS).
func CheckLocalFS(path string) error {
	magic, err := fsMagic(path)
	if err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	return checkMagic(path, magic)
}

// checkMagic is CheckLocalFS after statfs(2).
func checkMagic(path string, magic uint32) error {
	if name := classifyFS(magic); name != "" {
		return fmt.Errorf("%w: %s is on %s (f_type 0x%X); the work directory must be on a local file system (seed 002 §3.1)", ErrNetworkFS, path, name, magic)
	}
	return nil
}
