//go:build linux

package fileio

import "syscall"

func fsMagic(path string) (uint32, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint32(st.Type), nil // int32 or int64 by architecture; magics fit 32 bits
}
