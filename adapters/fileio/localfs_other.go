//go:build !linux

package fileio

// fsMagic: off Linux (not a supported target for the daemon) there is no
// statfs f_type to classify, so CheckLocalFS accepts every directory.
func fsMagic(string) (uint32, error) { return 0, nil }
